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
