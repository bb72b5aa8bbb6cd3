"""The step profile's formulas against independent counts: matmul and attention FLOPs
against FlopCounterMode (attention written out as matmuls for the forward); every
class's number of calls against what the profiler records; the all-reduce events
against torch's own bucket assignment; the roofline times against a roof the test
makes up; bad input in one line."""

from __future__ import annotations

import json
import math

import pytest
import torch
import torch.distributed as dist
from conftest import refused
from torch.utils.flop_counter import FlopCounterMode

from snippets.core import results
from snippets.core.runtime import UsageError, run
from snippets.hardware import step_profile as S
from snippets.models.tiny_gpt import GPT, GPTConfig, random_batch, reference_attention

ODD = GPTConfig(37, 7, 3, 3, 15, bias=False, tie_embeddings=False)


def torch_count(cfg: GPTConfig, rows: int, written_out: bool) -> dict[str, int]:
    model, (idx, targets) = GPT(cfg), random_batch(cfg, rows)
    if written_out:  # the formula's matmuls, which FlopCounterMode counts natively
        for block in model.blocks:
            block.attn.attention = reference_attention
    with FlopCounterMode(display=False) as counter:
        logits, loss = model(idx, targets)
        forward = counter.get_flop_counts()["Global"].copy()
        loss.backward()
    return {str(k): v for k, v in forward.items()} | {
        "total": counter.get_total_flops()
    }


@pytest.mark.parametrize("cfg,rows", [(S.CONFIG, 2), (ODD, 3)])
def test_flops_equal_flop_counter_mode(cfg: GPTConfig, rows: int) -> None:
    costs = S.op_costs(cfg, rows)
    fused = torch_count(cfg, rows, written_out=False)  # fused SDPA: no native count
    assert sum(c.flops for c in costs["matmul"]) == fused["total"]
    # attention's forward, written out: QKᵀ and PV, two bmm
    forward = torch_count(cfg, rows, written_out=True)["aten.bmm"]
    assert sum(c.flops for c in costs["attention"][: cfg.n_layer]) == forward
    # and the whole class against torch's SDPA formulas, as the snippet counts it
    counted = S.counted_flops(cfg, rows)
    assert counted["attention"] == sum(c.flops for c in costs["attention"])


def test_the_profiler_sees_the_formulas_calls() -> None:
    cfg, rows = ODD, 3
    model, (idx, targets) = GPT(cfg), random_batch(cfg, rows)
    opt = torch.optim.AdamW(model.parameters())

    def step() -> None:
        model(idx, targets)[1].backward()
        opt.step()
        opt.zero_grad()

    kept: list[dict] = []
    S.profiled(step, kept)
    seen = kept[0]["classes"]
    costs = S.op_costs(cfg, rows)
    assert {op: seen[op]["calls"] for op in costs} == {
        op: len(calls) for op, calls in costs.items()
    }
    assert seen["all-reduce"]["calls"] == 0  # one process: no DDP, no all-reduce
    main_thread = sum(v["seconds"] for v in seen.values())
    assert main_thread <= kept[0]["wall"]  # classes never overlap on one thread


def test_the_all_reduce_time_is_the_union_of_its_spans() -> None:
    spans = [("gloo:all_reduce", 0, 10), ("gloo:all_reduce", 5, 20),
             ("gloo:all_reduce", 30, 31), ("aten::mm", 2, 6)]  # fmt: skip
    got = S.classify(spans)
    assert got["all-reduce"] == {"calls": 3, "seconds": 21e-9}  # 0–20, 30–31
    assert got["matmul"] == {"calls": 1, "seconds": 4e-9}


def fake_results(folder, peak: float, bandwidth: float, alpha: float) -> None:
    folder.mkdir(exist_ok=True)
    roof = {"peak_matmul_flops": peak, "bandwidth_bytes_per_s": bandwidth}
    cost = {"alpha_s": alpha, "beta_s_per_byte": 0.0, "gamma_s_per_byte": 0.0}
    for name, value in (("roofline", roof), ("cost_model", cost)):
        (folder / f"{name}.json").write_text(json.dumps({"result": value}))


def test_two_ranks_against_a_made_up_roof(tmp_path, monkeypatch) -> None:
    # knee at 2 FLOP/byte; every message costs 1 ms and bytes nothing
    fake_results(tmp_path, peak=2e10, bandwidth=1e10, alpha=1e-3)
    monkeypatch.setenv(results.RESULTS_ENV, str(tmp_path))
    cap = 0.25
    out = run(S.main, S.SPEC, options={"rows": 2, "rounds": 3, "bucket_cap_mb": cap})
    ops = {r["op"]: r for r in out["ops"]}
    # torch's own bucket assignment, on the parameters in the order backward fills
    params = list(GPT(S.CONFIG).parameters())[::-1]
    limits = [min(1024 * 1024, int(cap * 1024 * 1024)), int(cap * 1024 * 1024)]
    theirs, _ = dist._compute_bucket_assignment_by_size(params, limits)
    assert ops["all-reduce"]["calls"] == out["buckets"] == len(theirs)
    # a ring on 2 ranks sends 2 messages a bucket: 2 ms each bucket
    assert ops["all-reduce"]["predicted_s"] == pytest.approx(2e-3 * len(theirs))
    bound = {op for op, r in ops.items() if r["bound"] == "compute"}
    # matmul and attention: tens of FLOPs a byte; layer norm ≈ 1.05 (21 FLOPs, 5
    # fp32 tensors an element), the rest below 1
    assert bound == {"matmul", "attention"}
    # AdamW moves 7 fp32 tensors of P elements; at 14 FLOPs a parameter, memory wins
    share = out["roof"]["share"]
    moved = 7 * 4 * S.CONFIG.num_params()
    assert ops["optimizer"]["predicted_s"] == pytest.approx(moved / (1e10 * share))
    assert math.isclose(out["roof"]["peak"] / out["roof"]["bandwidth"], 2.0)
    assert len(out["step"]["profiled_ratio"]) == 3


def test_missing_results_are_one_line(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv(results.RESULTS_ENV, str(tmp_path))
    with pytest.raises(UsageError, match="run 'python -m snippets run roofline'"):
        S.load_roof(2)


@pytest.mark.parametrize(
    "args,words",
    [(["--rows", "0"], "--rows: must be at least 1"),
     (["--bucket-cap-mb", "-1"], "--bucket-cap-mb: must be greater than 0"),
     (["--rounds", "x"], "--rounds: expected a whole number")],
)  # fmt: skip
def test_bad_input_is_one_line_and_exit_2(args, words, capfd) -> None:
    assert words in refused(["run", "step_profile", *args], capfd)
