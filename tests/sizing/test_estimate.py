"""The combined estimate: its parts add up, and impossible configurations are refused
with a message that names the inputs."""

from __future__ import annotations

import pytest

from snippets.core.errors import UsageError
from snippets.sizing import estimate, flops, presets, traffic

H100 = presets.GPUS["h100-sxm"]


def run(name: str = "llama3-8b", **setup) -> dict:
    return estimate.estimate(presets.MODELS[name], H100, **setup)


def test_parts_add_up_and_utilisation_is_palms() -> None:
    r = run(dp=2, tp=2, pp=2, cp=2, global_batch=8, zero=1, sequence_parallel=True)
    mem = r["memory_bytes"]
    parts = ("weights", "gradients", "optimizer", "activations", "buffers")
    assert mem["total"] == pytest.approx(sum(mem[k] for k in parts))
    assert r["fits"] == (mem["total"] <= H100["hbm_bytes"])
    assert r["tokens_per_s"] == pytest.approx(8 * 8192 / r["step_time_s"])
    assert r["mfu"] == pytest.approx(
        flops.utilization(r["flops_per_token"], r["tokens_per_s"], 16, 989e12)
    )
    assert r["microbatches"] == 4 and set(r["comm_bytes_per_step"]) == {
        "dp", "tp", "pp", "cp", "ep"
    }  # fmt: skip
    comm = r["comm_bytes_per_step"]
    assert all(comm[k] > 0 for k in ("dp", "tp", "pp", "cp")) and comm["ep"] == 0
    # ZeRO over dp × cp = 4 ranks: the optimizer state is a quarter of the shard
    assert mem["optimizer"] == pytest.approx(r["params_per_gpu"] * 12 / 4)


def test_bare_parameter_count_is_zero_table_1() -> None:
    r = estimate.estimate(
        {"params": 7.5e9, "seq": 1}, H100, dp=64, zero=2, grad_bytes=2
    )
    assert f"{r['memory_bytes']['total'] / 1e9:.1f}" == "16.6"  # ZeRO Figure 1
    assert r["flops_per_token"] == 6 * 7.5e9


def test_tp_traffic_uses_nvlink_inside_a_node() -> None:
    r = run(tp=8)
    calls = traffic.tp_calls(1, 8192, 4096, 2, 32, 1)
    expect = traffic.seconds(calls, 8, H100["alpha_intra"], H100["nvlink_bw"])
    assert r["comm_seconds_per_step"]["tp"] == pytest.approx(expect)
    pcie = run(tp=8, intra_link="pcie")["comm_seconds_per_step"]["tp"]
    assert pcie > r["comm_seconds_per_step"]["tp"]


@pytest.mark.parametrize(
    "setup,words",
    [
        (dict(tp=3), "--heads 32 is not divisible by --tp 3"),
        (dict(tp=16), "--kv-heads 8 is not divisible by --tp 16"),
        (dict(dp=2, gpus=3), "dp·tp·pp·cp = 2 but --gpus is 3"),
        (dict(dp=2, global_batch=3), "--global-batch 3 is not a multiple"),
        (dict(pp=3), "--layers 32 is not divisible by pp·vpp = 3"),
        (dict(vpp=2), "--vpp above 1 needs --pp above 1"),
        (dict(cp=3), "--seq 8192 is not divisible by --cp 3"),
        (dict(zero=4), "--zero must be 0-3"),
        (dict(overlap=2.0), "--overlap must be between 0 and 1"),
    ],
)
def test_impossible_configurations(setup: dict, words: str) -> None:
    with pytest.raises(UsageError, match=words.replace("·", ".").replace("-", ".")):
        run(**setup)


@pytest.mark.parametrize(
    "setup,words",
    [
        (dict(dp=2**20 + 1), "--dp is above 1,048,576 GPUs"),
        (dict(dp=10**9), "--dp is above 1,048,576 GPUs"),
        (dict(dp=2**10, tp=8, pp=2**8), "dp·tp·pp·cp is above 1,048,576 GPUs"),
    ],
)
def test_more_gpus_than_two_to_the_20_are_refused(setup: dict, words: str) -> None:
    with pytest.raises(UsageError, match=words.replace("·", ".").replace("-", ".")):
        run(**setup)


def test_two_to_the_20_gpus_still_compute() -> None:
    r = estimate.estimate({"params": 1e9, "seq": 8}, H100, dp=2**20)
    assert r["inputs"]["gpus"] == 1_048_576


def test_held_parameters_are_what_the_weights_hold() -> None:
    # the weights' bytes ÷ 2 (bf16) are the parameters a GPU keeps; ZeRO-3 over 8
    # ranks keeps an eighth of Llama 3 8B, the other stages all of it
    n = 8_030_261_248
    for zero in range(4):
        r = run(dp=8, zero=zero)
        assert r["params"] == n
        assert r["params_held_per_gpu"] == (n / 8 if zero == 3 else n)
        assert r["memory_bytes"]["weights"] == 2 * r["params_held_per_gpu"]
    moe = estimate.estimate(
        presets.MODELS["mixtral-8x7b"], H100, dp=8, ep=4, tp=2, zero=3, seq=4096
    )  # experts sharded over dp/ep = 2 ranks, the rest over 8
    assert moe["memory_bytes"]["weights"] == pytest.approx(
        2 * moe["params_held_per_gpu"], rel=1e-15
    )
    assert moe["params_held_per_gpu"] < moe["params_per_gpu"] / 2


def test_memory_beyond_every_gpu_says_which_part_and_why() -> None:
    biggest = max(g["hbm_bytes"] for g in presets.GPUS.values())  # B200's 180 GB
    seen = set()
    for b in (1, 8, 16, 64, 100_000):
        r = run(micro_batch=b, dp=8, zero=3)
        mem, said = r["memory_bytes"], r["warnings"].get("memory_bytes")
        assert (said is not None) == (mem["total"] > biggest), (b, said)
        seen.add(said is not None)
        if said:
            assert said.startswith(f"{mem['total'] / 1e9:,.0f} GB a GPU")
            assert "b200: 180 GB" in said and f"micro-batch {b} × 8,192" in said
            assert "of it is activations: micro-batch" in said
    assert seen == {True, False}
    states = estimate.estimate({"params": 2e10, "seq": 8}, H100)  # 360 GB of states
    assert "GB of it is optimizer:" in states["warnings"]["memory_bytes"]
    assert "a shard of 20,000,000,000 parameters" in states["warnings"]["memory_bytes"]


def test_an_mfu_that_prints_as_zero_says_what_takes_the_step() -> None:
    seen = set()
    for dp in (8, 4096, 65536, 2**20):
        r = estimate.estimate(presets.MODELS["gpt2-124m"], H100, dp=dp)
        said = r["warnings"].get("mfu")
        assert (said is not None) == (f"{r['mfu']:.1%}" == "0.0%"), (dp, r["mfu"])
        seen.add(said is not None)
        if said:
            assert said.startswith("MFU rounds to 0.0%: DP communication over")
            assert f"over {dp:,} ranks" in said
    assert seen == {True, False}
    slow = estimate.estimate(presets.MODELS["gpt2-124m"], H100, efficiency=1e-4)
    assert slow["warnings"] == {
        "mfu": "MFU rounds to 0.0%: compute (at the --efficiency given) is 100% of "
        "the step"
    }
    assert run(dp=8, zero=1)["warnings"] == {}
