"""``python -m snippets bench ddp``: one small run on 2 ranks, where both sides of each
pair train to the same weights (torch's DDP and FSDP2 are the oracles); the command's
JSON records and table; the verdicts, which say only what the IQR allows; bad input
(one line, exit status 2). The timing itself is tested in tests/core/test_timing.py;
times on a shared machine are not a pass/fail."""

from __future__ import annotations

import json

import pytest
import torch
from conftest import refused

from snippets.core.cli import bench_program
from snippets.core.runtime import launch
from snippets.models.tiny_gpt import GPT, GPTConfig
from snippets.parallel.data import ddp_bench
from snippets.tools import registry

SMALL = GPTConfig(vocab_size=64, block_size=16, n_layer=2, n_head=2, n_embd=32)


def test_it_is_the_registered_bench_called_ddp() -> None:
    assert registry.bench_modules()["ddp"] == "snippets.parallel.data.ddp_bench"
    assert ddp_bench.BENCH == "ddp" and callable(ddp_bench.main)


def small_run() -> dict:
    run = ddp_bench.measure(rounds=3, bucket_cap_mb=0.05, cfg=SMALL, rows=2)
    states = {  # numpy arrays travel by value; a tensor's storage might not
        pair: [{k: v.numpy() for k, v in side.items()} for side in sides]
        for pair, sides in run["states"].items()
    }
    return {"records": run["records"], "states": states}


def test_a_small_run_trains_both_sides_alike_on_2_ranks() -> None:
    results = launch(small_run, 2, "gloo", 120)
    initial = GPT(SMALL, seed=0).state_dict()
    assert results[0]["records"] == results[1]["records"]  # one record, every rank
    for result in results:
        records = {r["impl"]: r for r in result["records"]}
        assert set(records) == {"ddp", "zero3"}
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
        for r in records.values():  # 2 warm-up steps are not among the 3 timed
            assert len(r["times_s"]) == len(r["baseline_times_s"]) == r["rounds"] == 3
            assert r["params"] == SMALL.num_params() and r["world_size"] == 2
        assert 0.0 <= records["ddp"]["hidden_fraction"] <= 1.0
        assert records["zero3"]["hidden_fraction"] is None


def test_json_records_one_per_implementation(capfd) -> None:
    args = ["-n", "2", "--rounds", "1", "--json", "--pairs", "ddp"]  # zero3: above
    assert bench_program(ddp_bench, ddp_bench.BENCH, args) == 0
    records = [json.loads(line) for line in capfd.readouterr().out.splitlines()]
    assert [(r["impl"], r["baseline"], r["world_size"]) for r in records] == [
        ("ddp", "torch_ddp", 2)
    ]
    assert records[0]["max_abs_diff"] < 1e-5  # the same data: the same weights
    lines = [*ddp_bench.describe(ddp_bench.CFG, ddp_bench.ROWS, 1), ddp_bench.HEADER]
    lines += [ddp_bench.format_row(r) for r in records]
    assert max(map(len, lines)) <= 88
    assert lines[-1].split()[:2] == ["ddp", "2"]


def record(ratio: float, lo: float, hi: float, impl: str = "ddp") -> dict:
    baseline = {"ddp": "torch_ddp", "zero3": "fsdp2"}[impl]
    spread = {"ratio": ratio, "ratio_lo": lo, "ratio_hi": hi, "rounds": 25}
    return {"impl": impl, "baseline": baseline, "world_size": 4, **spread,
            "hidden_fraction": 0.25}  # fmt: skip


def test_verdicts_say_only_what_the_iqr_allows() -> None:
    inside = ddp_bench.verdict(record(1.02, 0.97, 1.08))
    assert "1.02× the time of torch's DDP (IQR 0.97–1.08 over 25 rounds)" in inside
    assert "not separated: the IQR reaches 1" in inside
    assert "within the 1.05× target" in inside and "25% of its all-reduce" in inside
    slower = ddp_bench.verdict(record(1.10, 1.06, 1.20))
    assert "slower: the whole IQR" in slower and "over the 1.05× target" in slower
    assert "faster: the whole IQR" in ddp_bench.verdict(record(0.9, 0.85, 0.99))
    zero3 = ddp_bench.verdict(record(2.5, 2.2, 2.9, "zero3"))
    assert "of our ZeRO-3 took 2.50× the time of FSDP2" in zero3
    assert "target" not in zero3


@pytest.mark.parametrize(
    "args,named",
    [
        (["-n", "0"], "-n"),
        (["--bucket-cap-mb", "0"], "--bucket-cap-mb"),
        (["--bucket-cap-mb", "nan"], "--bucket-cap-mb"),
        (["--rounds", "0"], "--rounds"),
        (["--rounds", "2.5"], "--rounds"),
        (["--pairs", "zero4"], "--pairs"),
        (["--timeout", "0"], "--timeout"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args, named, capfd) -> None:
    assert named in refused(["bench", "ddp", *args], capfd)


@pytest.mark.parametrize("door", [["bench", "ddp"], ["run", "ddp_bench"]])
def test_nccl_without_a_gpu_per_rank_is_one_line_and_exit_2(door, capfd) -> None:
    assert "nccl" in refused([*door, "--backend", "nccl", "-n", "64"], capfd)
