"""Tests for snippets.comm.paired_timing: interleaved rounds, median ratio, spread."""

from __future__ import annotations

import statistics
import time

import pytest

from snippets.comm.paired_timing import paired_times, spread
from snippets.core.runtime import launch


@pytest.mark.parametrize(
    "values", [[3.0], [1.0, 2.0], [5.0, 1.0, 4.0, 2.0, 3.0], [0.5, 9.0, 1.0, 1.1]]
)
def test_spread_is_median_and_quartiles(values):
    median, lo, hi = spread(values)
    assert median == statistics.median(values)
    assert min(values) <= lo <= median <= hi <= max(values)
    if len(values) == 5:  # inclusive quartiles of 1..5 are 2 and 4
        assert (lo, hi) == (2.0, 4.0)


def _sleepers() -> tuple:
    # "ours" sleeps 2 ms, "the built-in" 8 ms: ours is four times as fast
    return tuple(
        paired_times(lambda: time.sleep(0.002), lambda: time.sleep(0.008), iters=6)
    )


def test_ratio_is_builtin_over_ours_and_its_spread_brackets_it():
    out = launch(_sleepers, 2, backend="gloo", timeout_s=60)
    t, t_builtin, ratio, lo, hi, cpu, cpu_builtin = out[0]
    assert out[0] == out[1]  # every rank agrees: slowest rank's time, mean CPU
    assert t_builtin > t > 0.0019
    assert lo <= ratio <= hi
    assert 2.0 < ratio < 4.5  # sleeping oversleeps, never undersleeps
    assert cpu >= 0 and cpu_builtin >= 0
