"""Tests for snippets.comm.paired_timing: interleaved rounds, median ratio, spread
(the spread itself is snippets.core.claims.Spread, tested there)."""

from __future__ import annotations

import statistics
import time

from snippets.comm.paired_timing import paired_times
from snippets.core.runtime import launch


def _sleepers() -> tuple:
    # "ours" sleeps 2 ms, "the built-in" 8 ms: ours is four times as fast
    return tuple(
        paired_times(lambda: time.sleep(0.002), lambda: time.sleep(0.008), iters=6)
    )


def test_ratio_is_builtin_over_ours_and_its_spread_brackets_it():
    out = launch(_sleepers, 2, backend="gloo", timeout_s=60)
    t, t_builtin, ratio, lo, hi, cpu, cpu_builtin, mine, theirs = out[0]
    assert out[0] == out[1]  # every rank agrees: slowest rank's time, mean CPU
    assert len(mine) == len(theirs) == 6
    assert (t, t_builtin) == (statistics.median(mine), statistics.median(theirs))
    # the ratio's median is that of the per-round ratios, not a ratio of medians
    assert ratio == statistics.median([b / a for a, b in zip(mine, theirs)])
    assert t_builtin > t > 0.0019
    assert lo <= ratio <= hi
    assert 2.0 < ratio < 4.5  # sleeping oversleeps, never undersleeps
    assert cpu >= 0 and cpu_builtin >= 0
