"""``python -m snippets bench ddp``: one tiny run's JSON records and its bad input (one
line, exit status 2), through ``bench(argv)``, which the command calls. No timing
assertions."""

from __future__ import annotations

import json

import pytest

from snippets.core import registry
from snippets.parallel.data import ddp_bench
from snippets.parallel.data.ddp_bench_timing import CFG, ROWS

KEYS = {
    "impl",
    "baseline",
    "world_size",
    "step_time_s",
    "step_time_min_s",
    "step_time_max_s",
    "torch_step_time_s",
    "torch_step_time_min_s",
    "torch_step_time_max_s",
    "ratio",
    "ratio_min",
    "ratio_max",
    "hidden_fraction",
    "cpu_s",
    "torch_cpu_s",
    "cpu_ratio",
    "max_abs_diff",
    "steps",
    "repeats",
    "bucket_cap_mb",
    "params",
}


def test_it_is_the_registered_bench_called_ddp() -> None:
    assert registry.bench_modules()["ddp"] == "snippets.parallel.data.ddp_bench"
    assert ddp_bench.BENCH == "ddp" and callable(ddp_bench.bench)


def test_json_records_one_per_implementation_and_world_size(capsys) -> None:
    args = ["--world-sizes", "2", "--steps", "1", "--repeats", "1", "--json"]
    assert ddp_bench.bench([*args, "--pairs", "ddp"]) == 0  # zero3: test_ddp_bench
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(r["impl"], r["baseline"], r["world_size"]) for r in records] == [
        ("ddp", "torch_ddp", 2)
    ]
    for r in records:
        assert set(r) == KEYS, set(r) ^ KEYS
        assert r["ratio"] == r["step_time_s"] / r["torch_step_time_s"]
        assert r["ratio_min"] == r["ratio"] == r["ratio_max"]  # one repeat
        assert r["steps"] == 1 and r["bucket_cap_mb"] == 25.0
        assert r["max_abs_diff"] < 1e-5, r  # the same data: the same weights
    assert 0.0 <= records[0]["hidden_fraction"] <= 1.0
    lines = [*ddp_bench.describe(CFG, ROWS, 1, 1), ddp_bench.HEADER]
    lines += [ddp_bench.format_row(r) for r in records]
    assert max(map(len, lines)) <= 88
    assert lines[-1].split()[:2] == ["ddp", "2"]


def record(ratio: float, lo: float, hi: float, impl: str = "ddp") -> dict:
    baseline = {"ddp": "torch_ddp", "zero3": "fsdp2"}[impl]
    spread = {"ratio": ratio, "ratio_min": lo, "ratio_max": hi, "repeats": 5}
    return {"impl": impl, "baseline": baseline, "world_size": 4, **spread,
            "hidden_fraction": 0.25}  # fmt: skip


def test_verdicts_say_only_what_the_spread_allows() -> None:
    inside = ddp_bench.verdict(record(1.02, 0.97, 1.08))
    assert "1.02× the time of torch's DDP (0.97–1.08 over 5 repeats)" in inside
    assert "do not separate" in inside and "within the 1.05× target" in inside
    assert "25% of its all-reduce time" in inside
    slower = ddp_bench.verdict(record(1.10, 1.06, 1.20))
    assert "slower in every repeat" in slower and "over the 1.05× target" in slower
    assert "faster in every repeat" in ddp_bench.verdict(record(0.9, 0.85, 0.99))
    zero3 = ddp_bench.verdict(record(2.5, 2.2, 2.9, "zero3"))
    assert (
        "of our ZeRO-3 took 2.50× the time of FSDP2" in zero3 and "target" not in zero3
    )


@pytest.mark.parametrize(
    "args,named",
    [
        (["--world-sizes", "0"], "--world-sizes"),
        (["--world-sizes", "2", "-1"], "--world-sizes"),
        (["--bucket-cap-mb", "0"], "--bucket-cap-mb"),
        (["--bucket-cap-mb", "nan"], "--bucket-cap-mb"),
        (["--steps", "0"], "--steps"),
        (["--repeats", "2.5"], "--repeats"),
        (["--pairs", "zero4"], "--pairs"),
        (["--timeout", "0"], "--timeout"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args, named, capsys) -> None:
    with pytest.raises(SystemExit) as exit_:
        ddp_bench.bench(args)
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and err.count("\n") == 1 and named in err, err


def test_nccl_without_a_gpu_per_rank_is_one_line_and_exit_2(capsys) -> None:
    assert ddp_bench.bench(["--backend", "nccl", "--world-sizes", "2", "64"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "nccl" in err and "Traceback" not in err
