"""Shared measuring tools for benchmarks: one function timed alone (the paired-timing
harness, ``snippets.core.timing.interleave``, given a single function), nccl-tests'
definitions of bandwidth, and measured peak memory.

Benchmarks report ratios measured in one run (ours ÷ the built-in), never a bare time
as pass/fail: two numbers from the same machine, minutes apart, are comparable; a number
from another day is not.
"""

from __future__ import annotations

import contextlib
import os
import statistics
import subprocess
import sys
from dataclasses import dataclass
from typing import Callable, Iterator

import torch
import torch.distributed as dist

from snippets.core.timing import interleave


def time_it(
    fn: Callable[[], object],
    *,
    warmup: int = 2,
    iters: int = 5,
    device: torch.device | None = None,
    group: dist.ProcessGroup | None = None,
) -> float:
    """Median seconds of ``fn()`` over ``time_samples``."""
    return statistics.median(time_samples(fn, warmup, iters, device, group))


def time_samples(
    fn: Callable[[], object],
    warmup: int = 2,
    iters: int = 5,
    device: torch.device | None = None,
    group: dist.ProcessGroup | None = None,
) -> list[float]:
    """Seconds of each of ``iters`` calls of ``fn()``, after ``warmup`` untimed ones:
    ``interleave`` with one function, so one loop times everything. In a process
    group every rank starts each call together (a barrier) and the slowest rank's
    time counts, as nccl-tests does. ``device``: the one to wait for (the rank's own
    by default)."""
    timed = interleave({"fn": fn}, iters, warmup=warmup, device=device, group=group)
    return timed.wall["fn"]


def algbw(size_bytes: int, seconds: float) -> float:
    """nccl-tests' algorithm bandwidth: bytes of the user's buffer ÷ time (bytes/s)."""
    return size_bytes / seconds


def busbw(
    size_bytes: int, seconds: float, world_size: int, collective: str = "all_reduce"
) -> float:
    """nccl-tests' bus bandwidth: algbw times the factor that makes it comparable to the
    link's speed, whatever the rank count (nccl-tests, doc/PERFORMANCE.md).

    all_reduce: 2(n-1)/n; all_gather and reduce_scatter: (n-1)/n; broadcast, reduce: 1.
    """
    n = world_size
    factor = {
        "all_reduce": 2 * (n - 1) / n,
        "all_gather": (n - 1) / n,
        "reduce_scatter": (n - 1) / n,
        "broadcast": 1.0,
        "reduce": 1.0,
    }[collective]
    return algbw(size_bytes, seconds) * factor


# --8<-- [start:peak_memory]
def peak_memory_bytes(
    fn: Callable[[], object], device: torch.device | None = None
) -> int:
    """Measured peak of the memory ``fn()`` allocates on ``device``, above what was
    already live when it started (bytes). Nothing is computed from shapes: this counts
    allocations.

    CUDA: the caching allocator's own high-water mark (``max_memory_allocated``).
    CPU: torch's profiler records every allocation and free of the CPU allocator
    (``profile_memory=True``); the running sum of those events, in time order, peaks.
    """
    device = torch.device("cpu") if device is None else torch.device(device)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        before = torch.cuda.memory_allocated(device)
        fn()
        torch.cuda.synchronize(device)
        return torch.cuda.max_memory_allocated(device) - before
    from torch.profiler import ProfilerActivity, profile

    # Kineto prints two "USDT" lines to stderr per profile unless told not to; it reads
    # this when the profiler first starts (a value set by the user wins).
    os.environ.setdefault("KINETO_LOG_LEVEL", "6")
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    events = [
        e
        for e in prof.profiler.kineto_results.events()
        if e.name() == "[memory]" and e.device_type() == torch.autograd.DeviceType.CPU
    ]
    live = peak = 0
    for e in sorted(events, key=lambda e: e.start_ns()):
        live += e.nbytes()  # > 0: an allocation, < 0: a free
        peak = max(peak, live)
    return peak


# --8<-- [end:peak_memory]


@contextlib.contextmanager
def busy_core(group: dist.ProcessGroup | None = None) -> Iterator[int | None]:
    """One core of this machine kept busy by another program while the block runs:
    how a benchmark reads on a machine that is not quiet. With a process group, only
    its first local rank starts the program (one per machine) and every rank enters
    and leaves together. Yields the program's pid where this rank started it."""
    together = dist.is_initialized()
    local = int(os.environ.get("LOCAL_RANK", dist.get_rank(group))) if together else 0
    burner = None
    if local == 0:
        burner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        if together:
            dist.barrier(group=group)
        yield burner.pid if burner else None
        if together:
            dist.barrier(group=group)
    finally:
        if burner is not None:
            burner.kill()
            burner.wait()


# --8<-- [start:saved]
@dataclass(frozen=True)
class Saved:
    dtype: torch.dtype  # of the first tensor packed from this storage
    numel: int  # elements of the whole storage

    @property
    def nbytes(self) -> int:
        return self.numel * self.dtype.itemsize


def saved_storages(run: Callable[[], object], module: torch.nn.Module) -> list[Saved]:
    """The distinct storages autograd packs for backward while ``run()`` runs, the
    module's parameters left out. A view of a storage already packed costs nothing
    more. Under a checkpoint, torch's own hook packs the inner tensors (and keeps
    none), so this hook sees only what the checkpoint saves: its inputs."""
    weights = {p.untyped_storage().data_ptr() for p in module.parameters()}
    kept: dict[int, tuple[torch.Tensor, Saved]] = {}  # alive: no address reused

    def pack(t: torch.Tensor) -> torch.Tensor:
        storage = t.untyped_storage()
        ptr = storage.data_ptr()
        if ptr not in weights and ptr not in kept and storage.nbytes():
            kept[ptr] = (t, Saved(t.dtype, storage.nbytes() // t.dtype.itemsize))
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = run()
    del out
    return [saved for _, saved in kept.values()]


def saved_activation_bytes(run: Callable[[], object], module: torch.nn.Module) -> int:
    """Bytes of the distinct non-parameter storages autograd saves during run()."""
    return sum(s.nbytes for s in saved_storages(run, module))


# --8<-- [end:saved]
