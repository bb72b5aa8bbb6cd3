"""Tests for snippets.comm.algorithms.allreduce_bench, which is both ``run
allreduce_bench`` and ``bench allreduce``: its records (nccl-tests' bandwidth
definitions, ours beside the built-in), its report on real ranks, the ranking that
names a winner only where the spread separates it, and bad input (its sentences:
tests/comm/algorithms/test_allreduce_claims.py; the timing itself:
tests/core/test_timing.py). No timing assertions: times on a shared machine are not a
pass/fail."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import refused

from snippets.comm.algorithms import allreduce
from snippets.comm.algorithms import allreduce_bench as ab
from snippets.core import charts
from snippets.core.cli import bench_program
from snippets.core.runtime import launch
from snippets.tools import registry

REPO = Path(__file__).resolve().parents[3]


def command(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "snippets", "bench", "allreduce", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=240,
    )


def bus_factor(collective: str, n: int) -> float:
    """nccl-tests, doc/PERFORMANCE.md, written out again here as the oracle."""
    return 2 * (n - 1) / n if collective == "all_reduce" else (n - 1) / n


def expected_bytes(collective: str, size: int, n: int) -> int:
    return size // 4 * 4 if collective == "all_reduce" else size // (4 * n) * 4 * n


def test_bench_and_run_are_one_program(capfd) -> None:
    assert registry.bench_modules()["allreduce"] == ab.__name__
    assert registry.bench("allreduce") is registry.snippet("allreduce_bench").module
    for where in (["bench", "allreduce"], ["run", "allreduce_bench"]):
        # one parser: the same option, the same refusal
        assert "--target-mib" in refused([*where, "--target-mib", "-1"], capfd)


@pytest.mark.parametrize(
    "collectives,n,algos,extra",
    [
        (["all_reduce"], 3, {"ring", "tree"}, ["--algorithms", "ring", "tree"]),
        (["all_gather", "reduce_scatter"], 2, {"ring"}, ["--handshake"]),
    ],
)
def test_json_records(collectives, n, algos, extra):
    sizes = [4096, 12345]
    proc = command(
        *("-n", str(n), "--collectives", *collectives, "--sizes", *map(str, sizes)),
        *("--iters", "2", "--target-mib", "0", "--json", *extra),
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    records = [json.loads(line) for line in proc.stdout.splitlines()]  # only JSON
    got = {(r["collective"], r["algorithm"], r["size_bytes"]) for r in records}
    points = [(c, a, s) for c in collectives for a in algos for s in sizes]
    assert got == {(c, a, expected_bytes(c, s, n)) for c, a, s in points}
    for r in records:
        assert r["world_size"] == n and r["rounds"] == 2
        assert len(r["times_s"]) == len(r["baseline_times_s"]) == 2
        f = bus_factor(r["collective"], n)
        assert r["algbw"] == pytest.approx(r["size_bytes"] / r["time_s"])
        assert r["busbw"] == pytest.approx(r["algbw"] * f)
        assert r["baseline_busbw"] == pytest.approx(
            r["size_bytes"] / r["baseline_time_s"] * f
        )
        # "ours ÷ built-in" reads as busbw: above 1, ours moved the bytes faster
        per_round = [b / a for a, b in zip(r["times_s"], r["baseline_times_s"])]
        assert r["speedup"] == pytest.approx(sum(per_round) / 2)  # median of two


def test_table_output_names_ours_and_builtin():
    proc = command(
        *("-n", "2", "--collectives", "all_gather", "--sizes", "64K"),
        *("--iters", "1", "--target-mib", "0"),
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.strip().splitlines()
    assert [line.split(" fit ")[0] for line in lines[:2]] == ["idle", "busy"]
    assert "busbw" in lines[2] and "ours ÷ built-in" in lines[2] and len(lines) == 4
    assert "all_gather" in lines[3] and "64 KiB" in lines[3] and "GB/s" in lines[3]
    assert all(len(line) <= 88 for line in lines)


def record(name: str, ratio: float, lo: float, hi: float, size: int = 4096) -> dict:
    return {"algorithm": name, "size_bytes": size, "speedup": ratio} | {
        "speedup_lo": lo,
        "speedup_hi": hi,
    }


def test_a_winner_only_where_the_spread_separates_it():
    apart = [record("ring", 1.5, 1.4, 1.6), record("tree", 1.1, 0.9, 1.3)]
    assert ab.best_row(apart, 4096)["fastest of ours"] == "ring"
    close = [record("ring", 1.5, 1.2, 1.6), record("tree", 1.1, 0.9, 1.3)]
    row = ab.best_row(close, 4096)
    assert row["fastest of ours"] == "no clear winner"
    assert row["within its spread"] == "ring, tree"


def _small() -> dict:
    return ab.main(sizes=[4096, 1 << 20], iters=2, target_mib=1)


def test_main_reports_on_three_ranks():
    main = launch(_small, 3, backend="gloo", timeout_s=300)[0]
    reduce = [r for r in main["records"] if r["collective"] == "all_reduce"]
    assert {r["algorithm"] for r in reduce} == set(allreduce.ALGORITHMS)
    assert len(main["tables"]["sweep"]) == len(main["tables"]["ratios"]) == len(reduce)
    assert {r["collective"] for r in main["records"]} == {
        "all_reduce",
        "all_gather",
        "reduce_scatter",
    }
    for spec in main["figures"].values():
        charts.validate(spec)
        assert spec["description"]
    assert [row["ranks"] for row in main["tables"]["target"]] == [3]  # all of them
    assert main["markdown"]["findings"].count("\n- ") >= 4
    # the baseline's own spread, one row per size of the sweep, over every round
    assert (
        [row["size"] for row in main["tables"]["builtin"]]
        == [row["size"] for row in main["tables"]["best"]]
        == ["4 KiB", "1 MiB"]
    )
    # a narrow table: no more than six columns
    assert all(len(rows[0]) <= 6 for rows in main["tables"].values())


@pytest.mark.parametrize(
    "argv",
    [
        ["--sizes", "garbage"],
        ["--sizes", "1.5M"],
        ["--sizes", "2"],
        ["-n", "0"],
        ["--iters", "0"],
        ["--collectives", "broadcast"],
        ["--algorithms", "nope"],
        ["--target-mib", "-1"],
    ],
)
def test_bad_input_is_one_line_and_exit_2(argv, capfd):
    def bench(argv: list[str]) -> int:
        return bench_program(ab, ab.BENCH, argv)

    line = refused(argv, capfd, entry=bench)
    assert line.startswith("error:")
    assert argv[0] in line  # it names the option


@pytest.mark.parametrize(
    "argv,named",
    [
        (["-n", "1"], "-n must be at least 2"),
        (["-n", "4", "--collectives", "reduce_scatter", "--sizes", "8"], "--sizes"),
        (["--backend", "carrier-pigeon"], "backend"),
    ],
)
def test_what_cannot_run_is_one_line_and_exit_2(argv, named, capfd):
    line = refused(["bench", "allreduce", *argv], capfd, nothing_on_stdout=True)
    assert line.startswith("error:") and named in line


@pytest.mark.parametrize(
    "text,value",
    [
        ("4096", 4096),
        ("64K", 65536),
        ("1M", 1 << 20),
        ("1MiB", 1 << 20),
        ("2g", 2 << 30),
        ("3kb", 3072),
        ("4", 4),
    ],
)
def test_parse_size(text, value):
    assert ab.parse_size(text) == value


@pytest.mark.parametrize("text", ["", "M", "1.5M", "-4", "1T", "3", "12 parsecs"])
def test_parse_size_rejects(text):
    with pytest.raises(argparse.ArgumentTypeError):
        ab.parse_size(text)


@pytest.mark.gpu
@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs 2 CUDA GPUs")
def test_bench_on_nccl():
    proc = command(
        *("-n", "2", "--backend", "nccl", "--sizes", "1M", "64M", "--iters", "3"),
        *("--target-mib", "0", "--json"),
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    records = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
    assert records and all(r["backend"] == "nccl" for r in records)


def _record(name: str, size: int, measured: float, model: float) -> dict:
    return {"collective": "all_reduce", "algorithm": name, "backend": "gloo",
            "size_bytes": size, "time_s": measured, "predicted_ring_s": model,
            "baseline_time_s": measured}  # fmt: skip


def test_the_chart_notes_the_measurement_furthest_from_its_model():
    records = [
        _record("ring", 4096, 2e-4, 1e-4),  # 2× the model
        _record("ring", 1 << 20, 3e-3, 2.9e-3),
        _record("double_tree", 4096, 1e-4, 4e-4),  # a quarter: furthest, below
        _record("double_tree", 1 << 20, 5e-3, 5e-3),
    ]
    spec = ab.chart(records, ["ring", "double_tree"], "t")
    charts.validate(spec)
    notes = {
        (r["series"], r["x"], r["y"], r["text"])
        for layer in spec["layer"]
        for r in layer.get("data", {}).get("values", [])
        if "text" in r
    }
    assert notes == {("double_tree", 4096, 1e-4, "0.25× its model's time")}
    # the models are drawn only where measured: no point past 1 MiB
    assert max(r["x"] for r in spec["data"]["values"]) == 1 << 20
