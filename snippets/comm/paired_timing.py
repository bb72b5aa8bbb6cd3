"""Ours beside the built-in, timed in the same run, call by call.

A machine that gets busier or quieter halfway through a run slows both alike only if
they take turns: one call of ours, one of the built-in, round after round, alternating
which goes first. Each round gives one ratio; the report is the median ratio and its
spread (the interquartile range) over the rounds, so that a ranking can be stated only
where the spread separates it.
"""

from __future__ import annotations

import statistics
import time
from typing import Callable, NamedTuple, Sequence

import torch
import torch.distributed as dist

from snippets.core.claims import Spread
from snippets.core.measure import time_it
from snippets.core.runtime import device


# --8<-- [start:paired]
class Paired(NamedTuple):
    time_s: float  # median wall-clock seconds of a call of ours
    builtin_time_s: float
    ratio: float  # median over rounds of built-in time ÷ ours: ours' speed-up
    ratio_lo: float  # its spread: first and third quartile over the rounds
    ratio_hi: float
    cpu_s: float  # CPU seconds a rank spends per call (all its threads), rank mean
    builtin_cpu_s: float
    times_s: Sequence[float]  # every round's wall time of ours, in order
    builtin_times_s: Sequence[float]


def cpu_per_call(
    fn: Callable[[], None], iters: int, group: dist.ProcessGroup | None = None
) -> float:
    """CPU seconds this process (all its threads) spends per call, over back-to-back
    calls with no timer in between, averaged over the ranks."""
    dev = device()
    dist.barrier(group=group)
    start = time.process_time()
    for _ in range(iters):
        fn()
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)
    per_call = (time.process_time() - start) / iters
    spent = torch.tensor([per_call], dtype=torch.float64, device=dev)
    dist.all_reduce(spent, group=group)
    return spent.item() / dist.get_world_size(group)


def paired_times(
    ours: Callable[[], None],
    builtin: Callable[[], None],
    iters: int,
    group: dist.ProcessGroup | None = None,
) -> Paired:
    """Time ours and the built-in alternately, one call each per round, taking turns at
    going first; then the CPU time of each, in the order ours, built-in, built-in, ours,
    so that a machine getting busier or quieter during the run favours neither."""
    dev, fns, wall, cpu = device(), (ours, builtin), ([], []), [0.0, 0.0]
    ours(), builtin()  # warm-up: connections, allocations, caches
    for i in range(iters):
        for j in (0, 1) if i % 2 == 0 else (1, 0):
            wall[j].append(time_it(fns[j], warmup=0, iters=1, device=dev, group=group))
    half = max(1, iters // 2)
    for j in (0, 1, 1, 0):
        cpu[j] += cpu_per_call(fns[j], half, group) / 2
    ratio = Spread.of([theirs / mine for mine, theirs in zip(*wall)])
    medians = statistics.median(wall[0]), statistics.median(wall[1])
    return Paired(*medians, *ratio, *cpu, *wall)


# --8<-- [end:paired]
