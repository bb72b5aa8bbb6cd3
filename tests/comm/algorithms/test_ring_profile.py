"""Tests for snippets.comm.algorithms.ring_profile: the per-thread clocks against the
process's own CPU clock and the kernel's switch count, the target's outcome against the
IQR rule, and small runs of main() on 2 ranks, with and without /proc/self/task."""

from __future__ import annotations

import os
import time

import pytest
from conftest import refused

from snippets.comm.algorithms import ring_profile as P
from snippets.core.claims import Spread, verdict
from snippets.core.runtime import launch

linux = pytest.mark.skipif(
    not os.path.isdir("/proc/self/task"), reason="per-thread clocks need Linux /proc"
)


@linux
def test_thread_clocks_add_up_to_the_process_clock_and_count_sleeps() -> None:
    before, cpu0 = P.thread_clocks(), time.process_time()
    sum(i * i for i in range(3_000_000))  # CPU in this thread: ~0.1 s
    for _ in range(20):  # each sleep is one voluntary context switch
        time.sleep(0.001)
    after, cpu = P.thread_clocks(), time.process_time() - cpu0
    spent = sum(a[0] - before.get(n, [0.0, 0.0])[0] for n, a in after.items())
    assert cpu > 0.01 and abs(spent - cpu) < 0.1 * cpu + 0.005, (spent, cpu)
    mine = after["python (main)"][1] - before["python (main)"][1]
    assert mine >= 20, mine


@pytest.mark.parametrize(
    "spread, word",
    [
        (Spread(0.95, 0.92, 1.01), "met"),
        (Spread(0.85, 0.80, 0.89), "missed"),
        (Spread(0.93, 0.85, 1.02), "not settled"),  # the median alone would say met
    ],
)
def test_the_target_outcome_is_the_iqr_against_the_target(spread, word) -> None:
    text = P.target_sentence("64 MiB", 2, spread)
    assert f"target: {word}" in text and spread.text() in text


def _profile() -> dict:
    return P.main(mib=4, rounds=3)


@linux
def test_main_on_two_ranks_renders_its_own_numbers() -> None:
    out = launch(_profile, 2, backend="gloo", timeout_s=120)
    assert out[0]["cpu_ms"] == out[1]["cpu_ms"]  # averaged over the ranks, on each
    res = out[0]
    ratio = Spread(*res["ratio"])
    assert res["outcome"] == verdict(ratio, P.TARGET) and ratio.lo <= ratio.hi
    rows = {r["per call, per rank"]: r for r in res["tables"]["threads"]}
    for key, (col, _) in P.COLUMNS.items():
        parts = [
            rows[f"CPU, {w} (ms)"][col]
            for w in ("the thread that runs it", "gloo's transport thread")
        ]
        assert all(x > 0 for x in parts), (col, parts)  # both threads did work
        whole = rows["CPU, all threads (ms)"][col]
        assert whole == pytest.approx(sum(parts) + rows["CPU, other threads (ms)"][col])
        assert whole == pytest.approx(res["cpu_ms"][key])
        wall = rows["wall, back to back (ms)"][col]
        assert wall == pytest.approx(
            parts[0] + rows["the thread that runs it, off the CPU (ms)"][col]
        )
    assert res["markdown"]["target"] == f"- {P.target_sentence('4 MiB', 2, ratio)}"
    assert "the target" not in res["markdown"]["verdict"]  # said once, in "target"


def _profile_without_task(missing: str) -> dict:
    P.TASKS = missing  # in this rank: the reader taken away, as on macOS
    assert P.thread_clocks() == {}
    return P.main(mib=1, rounds=3)


def test_main_without_thread_accounts_gives_the_wall_and_says_so(tmp_path) -> None:
    args = (str(tmp_path / "task"),)
    out = launch(_profile_without_task, 2, backend="gloo", timeout_s=120, args=args)
    res = out[0]
    ratio = Spread(*res["ratio"])
    assert res["markdown"]["target"] == f"- {P.target_sentence('1 MiB', 2, ratio)}"
    assert res["markdown"]["verdict"].endswith(f"- {P.NO_CLOCKS}")
    assert "CPU per call" not in res["markdown"]["verdict"] and res["cpu_ms"] is None
    (row,) = res["tables"]["threads"]  # no row of CPU that would read 0
    assert row["per call, per rank"] == "wall, back to back (ms)"
    assert all(row[col] > 0 for col, _ in P.COLUMNS.values())


def test_bad_size_is_one_line_and_exit_2(capfd) -> None:
    assert "--mib" in refused(["run", "ring_profile", "--mib", "0"], capfd)
