"""Tests for snippets.comm.algorithms.allreduce_bench, the snippet: its report on real
ranks, the ranking that names a winner only where the spread separates it, and bad input
(its sentences: tests/comm/algorithms/test_allreduce_claims.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from snippets.comm.algorithms import allreduce
from snippets.comm.algorithms import allreduce_bench as ab
from snippets.core import charts
from snippets.core.runtime import launch

REPO = Path(__file__).resolve().parents[3]


def record(name: str, ratio: float, lo: float, hi: float, size: int = 4096) -> dict:
    return {"algorithm": name, "size_bytes": size, "ratio": ratio} | {
        "ratio_lo": lo,
        "ratio_hi": hi,
    }


def test_a_winner_only_where_the_spread_separates_it():
    apart = [record("ring", 1.5, 1.4, 1.6), record("tree", 1.1, 0.9, 1.3)]
    assert ab.best_row(apart, 4096)["fastest of ours"] == "ring"
    close = [record("ring", 1.5, 1.2, 1.6), record("tree", 1.1, 0.9, 1.3)]
    row = ab.best_row(close, 4096)
    assert row["fastest of ours"] == "no clear winner"
    assert row["within its spread"] == "ring, tree"


def test_main_reports_on_three_ranks():
    out = launch(ab.main, 3, backend="gloo", timeout_s=300, args=(1,))
    main = out[0]
    reduce = [r for r in main["records"] if r["collective"] == "all_reduce"]
    assert {r["algorithm"] for r in reduce} == set(allreduce.ALGORITHMS)
    assert len(main["tables"]["sweep"]) == len(main["tables"]["ratios"]) == len(reduce)
    assert {r["collective"] for r in main["records"]} == {
        "all_reduce",
        "all_gather",
        "reduce_scatter",
    }
    assert all(
        r["predicted_ping_pong_s"] > 0
        and r["predicted_ring_s"] > 0
        and r["ratio_lo"] <= r["ratio"] <= r["ratio_hi"]
        for r in main["records"]
    )
    for spec in main["figures"].values():
        charts.validate(spec)
        assert spec["description"]
    assert [row["ranks"] for row in main["tables"]["target"]] == [2, 3]
    assert all(row["ring ÷ built-in"] > 0 for row in main["tables"]["target"])
    assert main["markdown"]["findings"].count("\n- ") >= 4
    # the baseline's own spread, one row per size of the sweep, over every round
    assert [row["size"] for row in main["tables"]["builtin"]] == [
        row["size"] for row in main["tables"]["best"]
    ]
    assert all(len(r["builtin_times_s"]) == len(r["times_s"]) for r in reduce)
    # a narrow table: no more than six columns
    assert all(len(rows[0]) <= 6 for rows in main["tables"].values())


@pytest.mark.parametrize("value", ["-1", "x", "1.5"])
def test_bad_target_is_one_line_and_exit_2(value):
    proc = subprocess.run(
        [sys.executable, "-m", "snippets", "run", "allreduce_bench"]
        + ["--target-mib", value],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.startswith("error:") and "--target-mib" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
