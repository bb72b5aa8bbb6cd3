"""The DDP bench's timing: its arithmetic on times made up by hand, its turn-taking,
then one small run on 2 ranks: both sides of each pair trained to the same weights
(torch's DDP and FSDP2 are the oracles), and the records hold together. No timing
assertions: times on a shared machine are not a pass/fail."""

from __future__ import annotations

import pytest
import torch

from snippets.core.runtime import launch
from snippets.models.tiny_gpt import GPT, GPTConfig
from snippets.parallel.data import ddp_bench_timing as timing

CFG = GPTConfig(vocab_size=64, block_size=16, n_layer=2, n_head=2, n_embd=32)


def test_record_takes_medians_per_repeat_then_over_repeats() -> None:
    ours = [[1.0, 3.0, 2.0], [4.0, 4.0, 5.0], [9.0, 6.0, 6.0]]  # medians 2, 4, 6
    theirs = [[1.0, 1.0, 1.0], [3.0, 2.0, 1.0], [2.0, 2.0, 2.0]]  # 1, 2, 2
    r = timing.record("ddp", (ours, theirs), p=2)
    assert (r["step_time_s"], r["step_time_min_s"], r["step_time_max_s"]) == (4, 2, 6)
    assert (r["torch_step_time_s"], r["torch_step_time_max_s"]) == (2, 2)
    assert r["ratio"] == 2.0  # 4 ÷ 2; the per-repeat ratios are 2, 2 and 3
    assert (r["ratio_min"], r["ratio_max"]) == (2.0, 3.0)
    assert r["steps"] == 9 and r["repeats"] == 3 and r["baseline"] == "torch_ddp"


def test_interleaved_takes_turns_and_alternates_who_goes_first() -> None:
    calls: list[str] = []
    times = timing.interleaved(
        lambda: calls.append("A"), lambda: calls.append("B"), steps=2, repeats=2
    )
    assert "".join(calls) == "ABBABAAB"
    assert [len(side) for side in times] == [2, 2]
    assert all(len(rep) == 2 and min(rep) >= 0 for side in times for rep in side)


def small_run() -> dict:
    run = timing.measure(steps=2, repeats=2, bucket_cap_mb=0.05, cfg=CFG, rows=2)
    states = {  # numpy arrays travel by value; a tensor's storage might not
        pair: [{k: v.numpy() for k, v in side.items()} for side in sides]
        for pair, sides in run["states"].items()
    }
    return {"records": run["records"], "states": states}


def test_a_small_run_trains_both_sides_alike_on_2_ranks() -> None:
    results = launch(small_run, 2, "gloo", 120)
    initial = GPT(CFG, seed=0).state_dict()
    for result in results:
        records = {r["impl"]: r for r in result["records"]}
        assert set(records) == {"ddp", "zero3"}
        assert set(records["ddp"]) == set(records["zero3"])
        for pair, sides in result["states"].items():
            ours, theirs = (
                {k: torch.from_numpy(v) for k, v in s.items()} for s in sides
            )
            assert set(ours) == set(theirs) == set(initial), pair
            torch.testing.assert_close(ours, theirs)  # fp32, torch's defaults
            moved = max((ours[k] - initial[k]).abs().max() for k in initial)
            assert moved > 1e-4, pair  # it did train: the check could fail
            assert records[pair]["max_abs_diff"] == pytest.approx(
                max((ours[k] - theirs[k]).abs().max().item() for k in ours)
            )
        for r in records.values():
            assert r["world_size"] == 2 and r["steps"] == 4 and r["repeats"] == 2
            assert r["ratio"] == r["step_time_s"] / r["torch_step_time_s"]
            assert r["ratio_min"] <= r["ratio"] <= r["ratio_max"], r
            for side in ("", "torch_"):
                t = [r[f"{side}step_time{k}_s"] for k in ("_min", "", "_max")]
                assert 0 < t[0] <= t[1] <= t[2], r
            assert r["params"] == CFG.num_params()
            assert r["cpu_s"] > 0 and r["torch_cpu_s"] > 0
            assert r["cpu_ratio"] == r["cpu_s"] / r["torch_cpu_s"]
        assert 0.0 <= records["ddp"]["hidden_fraction"] <= 1.0
        assert records["zero3"]["hidden_fraction"] is None
