"""snippets.core.timing against what is known by construction. On a clock that moves
only when a call says so, every time is known: the ratio read back round by round, the
cost of going first evened out by taking turns, the warm-up left out, the slowest
rank's time and the ranks' mean CPU. On the real clocks, twice the work is twice the
CPU. The quartiles of known samples are numpy's percentiles."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from snippets.core import timing
from snippets.core.claims import SLOWER, TIED
from snippets.core.runtime import launch


class Clock:
    """Seconds that pass only when a call spends them: times known exactly."""

    def __init__(self) -> None:
        self.now, self.calls = 0.0, 0

    def __call__(self) -> float:
        return self.now

    def spend(self, seconds: float) -> None:
        self.calls += 1
        self.now += seconds


def test_a_known_ratio_reads_back_round_by_round_under_a_changing_load() -> None:
    clock = Clock()
    load = [1.0, 9.0, 2.0, 30.0, 1.5, 4.0, 7.0, 1.0, 12.0, 3.0]  # one per round

    def cost(units: float) -> None:  # both calls of a round see the same load
        clock.spend(units * load[clock.calls // 2 % len(load)])

    fns = {"ours": lambda: cost(2.0), "theirs": lambda: cost(1.0)}
    got = timing.interleave(fns, 10, warmup=0, clock=clock, cpu_clock=clock)
    r = timing.record(got, "ours", "theirs")
    # the load moves each side's times 30-fold; round by round, ours ÷ theirs is 2
    assert (r["ratio_lo"], r["ratio"], r["ratio_hi"]) == (2.0, 2.0, 2.0)
    assert (r["speedup_lo"], r["speedup_hi"]) == (0.5, 0.5) and r["order"] == SLOWER
    assert r["times_s"] == [2.0 * x for x in load] and r["cpu_ratio"] == 2.0
    assert r["time_s"] == pytest.approx(np.median(r["times_s"]))


def test_taking_turns_evens_out_what_going_first_costs() -> None:
    """Equal work, but whoever goes first in a round pays one unit more (a cold
    cache): alternating, neither is ranked ahead of the other."""
    clock = Clock()
    fns = {n: (lambda: clock.spend(2.0 if clock.calls % 2 == 0 else 1.0)) for n in "ab"}
    got = timing.interleave(fns, 8, warmup=0, clock=clock)
    r = timing.record(got, "a", "b")
    assert got.wall["a"] == [2.0, 1.0] * 4 and got.wall["b"] == [1.0, 2.0] * 4
    assert r["ratio_lo"] < 1.0 < r["ratio_hi"] and r["order"] == TIED, r


def test_turns_alternate_who_goes_first() -> None:
    calls: list[str] = []
    fns = {n: (lambda n=n: calls.append(n)) for n in "AB"}
    got = timing.interleave(fns, 4, warmup=0)
    assert "".join(calls) == "ABBAABBA"
    assert got.orders == [list("AB"), list("BA"), list("AB"), list("BA")]
    calls.clear()  # three: each goes first once in three rounds, rotating
    timing.interleave({n: (lambda n=n: calls.append(n)) for n in "ABC"}, 3, warmup=0)
    assert "".join(calls) == "ABCBCACAB"


def test_warm_up_calls_are_run_and_left_out() -> None:
    clock, count = Clock(), {"A": 0, "B": 0}

    def call(name: str) -> None:
        count[name] += 1
        clock.spend(100.0 if count[name] <= 2 else 1.0)  # the first two: slow

    fns = {n: (lambda n=n: call(n)) for n in "AB"}
    got = timing.interleave(fns, 5, warmup=2, clock=clock)
    assert count == {"A": 7, "B": 7}  # 2 warm-up calls + 5 timed, each
    assert got.wall == {"A": [1.0] * 5, "B": [1.0] * 5}


def test_a_sample_of_several_calls_is_timed_per_call() -> None:
    clock = Clock()
    fns = {"one": lambda: clock.spend(3.0), "four": lambda: clock.spend(3.0)}
    got = timing.interleave(fns, 5, warmup=1, clock=clock, calls={"four": 4})
    assert clock.calls == 2 + 5 * (1 + 4)
    assert got.wall["four"] == got.wall["one"] == [3.0] * 5


def spin(n: int) -> int:
    """n steps of pure Python on this thread: CPU time ∝ n."""
    x = 0
    for i in range(n):
        x += i
    return x


def test_twice_the_work_is_twice_the_cpu_on_the_real_clocks() -> None:
    r = timing.paired(lambda: spin(400_000), lambda: spin(200_000), 9)
    assert r["cpu_ratio"] == pytest.approx(2.0, rel=0.15), r
    assert r["rounds"] == len(r["times_s"]) == len(r["baseline_times_s"]) == 9
    assert min(r["times_s"] + r["baseline_times_s"]) > 0  # real seconds were read


def test_the_record_reads_known_samples_like_numpy() -> None:
    ours = [5.0, 1.0, 4.0, 2.0, 3.0, 9.0]
    theirs = [1.0, 2.0, 2.0, 1.0, 4.0, 3.0]
    rounds = timing.Rounds(
        wall={"a": ours, "b": theirs}, cpu={"a": [2.0] * 6, "b": [1.0] * 6},
        orders=[timing.turns("ab", r) for r in range(6)],
    )  # fmt: skip
    r = timing.record(rounds, "a", "b")
    q = (25, 50, 75)
    lo, mid, hi = np.percentile(ours, q)
    assert (r["time_lo_s"], r["time_s"], r["time_hi_s"]) == pytest.approx((lo, mid, hi))
    lo, mid, hi = np.percentile(theirs, q)
    assert (r["baseline_time_lo_s"], r["baseline_time_s"]) == pytest.approx((lo, mid))
    per_round = np.array(ours) / np.array(theirs)
    assert (r["ratio_lo"], r["ratio"], r["ratio_hi"]) == pytest.approx(
        tuple(np.percentile(per_round, q))
    )
    assert r["speedup"] == pytest.approx(np.percentile(1 / per_round, 50))
    assert r["cpu_ratio"] == 2.0 and r["times_s"] == ours
    assert timing.spread(r, "time") == (r["time_s"], r["time_lo_s"], r["time_hi_s"])


def _on_ranks() -> dict:
    import torch.distributed as dist

    rank, clock = dist.get_rank(), Clock()
    cpu = itertools.count(step=rank + 1).__next__  # a call costs rank + 1 of CPU
    # only rank 1 takes time: 2 for ours, 1 for the baseline; rank 0 none at all
    fns = (lambda: clock.spend(2.0 * rank)), (lambda: clock.spend(1.0 * rank))
    return timing.paired(*fns, 5, clock=clock, cpu_clock=cpu)


def test_slowest_rank_counts_and_cpu_is_the_rank_mean() -> None:
    a, b = launch(_on_ranks, 2, "gloo", 120)
    assert a == b  # every rank reports the same record: rank 0 took rank 1's times
    assert a["times_s"] == [2.0] * 5 and a["baseline_times_s"] == [1.0] * 5
    assert a["cpu_s"] == a["baseline_cpu_s"] == 1.5  # (1 + 2) ÷ 2


@pytest.mark.parametrize(
    "lo, hi, said",
    [(1.1, 1.3, "slower than theirs"), (0.7, 0.9, "faster than theirs"),
     (0.9, 1.1, "not separated from theirs: the IQR reaches 1")],
)  # fmt: skip
def test_the_sentence_ranks_only_where_the_iqr_is_off_1(lo, hi, said) -> None:
    ratios = [lo, lo, (lo + hi) / 2, hi, hi]  # inclusive quartiles: lo and hi
    rounds = timing.Rounds(
        wall={"a": ratios, "b": [1.0] * 5}, cpu={"a": [2.0] * 5, "b": [1.0] * 5},
        orders=[timing.turns("ab", r) for r in range(5)],
    )  # fmt: skip
    r = timing.record(rounds, "a", "b") | {"world_size": 3, "target": 1.05}
    text = timing.sentence(r, "ours", "theirs")
    assert text.startswith(f"At 3 ranks ours took {(lo + hi) / 2:.2f}× the time")
    assert f"(median of 5 rounds, IQR {lo:.2f}–{hi:.2f}): {said};" in text
    met = "within" if (lo + hi) / 2 <= 1.05 else "over"
    assert f"the median is {met} the 1.05× target" in text
    assert text.endswith("CPU time per call, ours ÷ theirs: 2.00.")
