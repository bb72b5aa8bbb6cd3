"""One ping-pong: the latency (and, with big messages, the bandwidth) of one link.

Rank ``src`` sends m bytes to rank ``dst``, which sends them straight back; half the
round trip is what one message costs, ``α + m·β`` in Hockney's model. Both the α-β fit
of the cost model and the latency matrix of the point-to-point benchmark come from this
one function, so the two notes report latency measured the same way.

The sizes are timed by the shared harness (``snippets.core.timing.interleave``): one of
each per round, the order rotating from round to round, a barrier before each call and
the slowest rank's time kept. So every rank of the group calls this; ranks other than
``src`` and ``dst`` only keep the barriers. Each size reports the median of its rounds.
"""

from __future__ import annotations

import functools
import statistics
from typing import Sequence

import torch
import torch.distributed as dist

from snippets.core.runtime import device
from snippets.core.timing import interleave


# --8<-- [start:ping_pong]
def ping_pong_rounds(
    sizes: Sequence[int],
    src: int = 0,
    dst: int = 1,
    iters: int = 15,
    group: dist.ProcessGroup | None = None,
) -> list[list[float]]:
    """Seconds of half a round trip of m bytes between ranks ``src`` and ``dst``
    (ranks within ``group``), every round, for each m in ``sizes``. Every rank of the
    group calls it."""
    if src == dst:
        raise ValueError(f"a ping-pong needs two different ranks, got {src} and {dst}")
    if iters < 1 or any(m < 1 for m in sizes):
        raise ValueError(f"need iters ≥ 1 and sizes ≥ 1 byte, got {iters}, {sizes}")
    rank, dev = dist.get_rank(group), device()
    # send/recv take global ranks, even inside a sub-group
    peer_of = {
        src: dst if group is None else dist.get_global_rank(group, dst),
        dst: src if group is None else dist.get_global_rank(group, src),
    }

    def once(buf: torch.Tensor) -> None:
        if rank == src:
            dist.send(buf, peer_of[src], group)
            dist.recv(buf, peer_of[src], group)
        elif rank == dst:
            dist.recv(buf, peer_of[dst], group)
            dist.send(buf, peer_of[dst], group)

    bufs = {f"{m} B": torch.empty(m, dtype=torch.uint8, device=dev) for m in sizes}
    # round after round, every size once, so a machine that gets busier halfway
    # through slows every size alike and the fitted slope stays honest; before the
    # rounds, two untimed calls of each size (connections, allocations)
    calls = {name: functools.partial(once, buf) for name, buf in bufs.items()}
    timed = interleave(calls, iters, warmup=2, device=dev, group=group)
    return [[t / 2 for t in timed.wall[f"{m} B"]] for m in sizes]  # half the trip


def ping_pong(
    sizes: Sequence[int],
    src: int = 0,
    dst: int = 1,
    iters: int = 15,
    group: dist.ProcessGroup | None = None,
) -> list[float]:
    """The median over the rounds of ``ping_pong_rounds``, for each size."""
    rounds = ping_pong_rounds(sizes, src, dst, iters, group)
    return [statistics.median(times) for times in rounds]


# --8<-- [end:ping_pong]
