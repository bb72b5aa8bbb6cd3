"""Ours beside theirs, timed in the same run: the one paired-timing harness.

A machine that gets busier or quieter halfway through a run slows two programs alike
only if they take turns. So every benchmark here times the same way: after ``warmup``
untimed calls of each, ``rounds`` rounds of one call of each, the order rotating from
round to round so that each goes first as often as any other (with two: A B, B A, A B,
...). Every timed call is kept, in order; none of the warm-up calls is. With a process
group, the ranks start each call together (a barrier) and a call's time is the slowest
rank's, as nccl-tests counts it; its CPU time (on the clock the caller picks: this
thread's, ``time.thread_time``, or every thread of the process, ``time.process_time``)
is the mean over the ranks.

``Rounds.record(ours, baseline)`` is the record every benchmark reports: each side's
median time and interquartile range, and the ratio of the two measured round by round
(both sides were timed in that round), with its median and IQR, both ways round:
``ratio`` = ours ÷ baseline in time (below 1, ours is faster) and ``speedup`` =
baseline ÷ ours (above 1, ours is faster; what ``claims.verdict`` reads). ``order``
ranks the two only where the IQR of the per-round ``ratio`` lies wholly on one side of
1 (``claims.compare``), and ``sentence`` says so in words.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

import torch
import torch.distributed as dist

from snippets.core.claims import FASTER, SLOWER, Spread, compare
from snippets.core.runtime import device as default_device

Clock = Callable[[], float]
ONE = Spread(1.0, 1.0, 1.0)  # a ratio of 1: neither side ahead


# --8<-- [start:rounds]
def turns(names: Sequence[str], r: int) -> list[str]:
    """Round r's order: the names rotated by r, so each goes first in its turn."""
    k = r % len(names)
    return [*names[k:], *names[:k]]


@dataclass
class Rounds:
    wall: dict[str, list[float]]  # name → seconds per call, one per round, in order
    cpu: dict[str, list[float]]  # name → CPU seconds per call on the chosen clock
    orders: list[list[str]]  # who went when, round by round

    def ratios(self, ours: str, baseline: str) -> list[float]:
        """Per round, ours ÷ baseline: two times from the same round."""
        return [a / b for a, b in zip(self.wall[ours], self.wall[baseline])]


def interleave(
    fns: Mapping[str, Callable[[], object]],
    rounds: int,
    *,
    warmup: int = 1,
    calls: Mapping[str, int] | None = None,
    cpu_clock: Clock = time.thread_time,
    clock: Clock = time.perf_counter,
    device: torch.device | None = None,
    group: dist.ProcessGroup | None = None,
) -> Rounds:
    """Time every function once a round, taking turns at going first, after
    ``warmup`` untimed calls of each. ``calls[name]`` back-to-back calls make one
    sample of ``name`` (short kernels; its time is per call). ``clock``: the wall
    clock, seconds (a test's own clock makes the times known)."""
    names, dev = list(fns), device if device is not None else default_device()
    per = {name: (calls or {}).get(name, 1) for name in names}
    grouped = dist.is_available() and dist.is_initialized()
    for _ in range(warmup):  # connections, allocations, caches, compilation
        for name in names:
            fns[name]()
    _sync(dev)
    wall = {name: [] for name in names}
    cpu = {name: [] for name in names}
    orders = [turns(names, r) for r in range(rounds)]
    for order in orders:
        for name in order:
            if grouped:
                dist.barrier(group=group)  # every rank starts the call together
            cpu0, start = cpu_clock(), clock()
            for _ in range(per[name]):
                fns[name]()
            _sync(dev)
            wall[name].append((clock() - start) / per[name])
            cpu[name].append((cpu_clock() - cpu0) / per[name])
    if grouped:  # one exchange at the end: nothing between the timed calls
        wall = _across_ranks(wall, dist.ReduceOp.MAX, dev, group)  # slowest rank
        cpu = _across_ranks(cpu, dist.ReduceOp.SUM, dev, group)
        p = dist.get_world_size(group)
        cpu = {name: [c / p for c in cs] for name, cs in cpu.items()}  # rank mean
    return Rounds(wall, cpu, orders)


# --8<-- [end:rounds]


# --8<-- [start:record]
def record(rounds: Rounds, ours: str, baseline: str) -> dict:
    """The one record format: median and IQR of each side's calls and of the
    per-round ratio, both ways round; every timed call kept."""
    mine, theirs = Spread.of(rounds.wall[ours]), Spread.of(rounds.wall[baseline])
    ratio = Spread.of(rounds.ratios(ours, baseline))  # time: below 1, ours is faster
    speedup = Spread.of(rounds.ratios(baseline, ours))  # above 1, ours is faster
    cpu_a, cpu_b = rounds.cpu[ours], rounds.cpu[baseline]
    cpu = [a / b for a, b in zip(cpu_a, cpu_b) if b > 0]
    return {
        "rounds": len(rounds.orders),
        "time_s": mine.median,
        "time_lo_s": mine.lo,
        "time_hi_s": mine.hi,
        "baseline_time_s": theirs.median,
        "baseline_time_lo_s": theirs.lo,
        "baseline_time_hi_s": theirs.hi,
        "ratio": ratio.median,
        "ratio_lo": ratio.lo,
        "ratio_hi": ratio.hi,
        "speedup": speedup.median,
        "speedup_lo": speedup.lo,
        "speedup_hi": speedup.hi,
        "order": compare(ratio, ONE),  # faster, slower, or not separated, by the IQR
        "cpu_s": statistics.median(cpu_a),
        "baseline_cpu_s": statistics.median(cpu_b),
        "cpu_ratio": statistics.median(cpu) if cpu else None,  # per round, ours ÷
        "times_s": list(rounds.wall[ours]),
        "baseline_times_s": list(rounds.wall[baseline]),
    }


# --8<-- [end:record]


def paired(
    ours: Callable[[], object], baseline: Callable[[], object], rounds: int, **kw
) -> dict:
    """``interleave`` two functions (``kw``: its options), then their ``record``."""
    return record(interleave({"ours": ours, "baseline": baseline}, rounds, **kw),
                  "ours", "baseline")  # fmt: skip


def spread(r: dict, key: str = "ratio") -> Spread:
    """A record's median and IQR of ``key`` (``ratio``, ``speedup``, ``time``,
    ``baseline_time``) as a ``Spread``."""
    unit = "_s" if key.endswith("time") else ""
    return Spread(r[f"{key}{unit}"], r[f"{key}_lo{unit}"], r[f"{key}_hi{unit}"])


def sentence(r: dict, what: str, theirs: str) -> str:
    """What a record says, and no more than its IQR allows; the ``target`` (a median
    ratio to stay under) and the CPU ratio where the record has them."""
    said = {FASTER: f"faster than {theirs}", SLOWER: f"slower than {theirs}"}.get(
        r["order"], f"not separated from {theirs}: the IQR reaches 1"
    )
    where = f"At {r['world_size']} ranks " if "world_size" in r else ""
    text = (
        f"{where}{what} took {r['ratio']:.2f}× the time of {theirs} (median of "
        f"{r['rounds']} rounds, IQR {r['ratio_lo']:.2f}–{r['ratio_hi']:.2f}): {said}"
    )
    if r.get("target") is not None:
        met = "within" if r["ratio"] <= r["target"] else "over"
        text += f"; the median is {met} the {r['target']}× target"
    if r.get("cpu_ratio") is not None:
        text += f". CPU time per call, ours ÷ theirs: {r['cpu_ratio']:.2f}"
    return text + "."


def _sync(dev: torch.device) -> None:
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def _across_ranks(
    samples: dict[str, list[float]],
    op: dist.ReduceOp,
    dev: torch.device,
    group: dist.ProcessGroup | None,
) -> dict[str, list[float]]:
    names = list(samples)
    t = torch.tensor([samples[n] for n in names], dtype=torch.float64, device=dev)
    dist.all_reduce(t, op=op, group=group)  # (functions, rounds)
    return dict(zip(names, t.tolist()))
