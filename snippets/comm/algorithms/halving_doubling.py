"""Recursive halving and doubling (Rabenseifner's all-reduce).

Reduce-scatter by recursive halving: in round k each rank swaps half of what it is
still responsible for with the partner whose rank differs in one bit, and keeps the
half it did not send, reduced. After log2 p rounds rank v owns the full reduction of
chunk v (the q chunks come from ``bounds``). Then an all-gather by recursive doubling
runs the same exchanges backwards. That is 2·log2 p rounds (the tree's latency)
moving 2(p−1)/p · n per rank (the ring's bandwidth): Thakur, Rabenseifner & Gropp
2005, section 4.

When p is not a power of two, with q the largest power of two below p and r = p − q,
the first 2r ranks pair up first: each even one hands its vector to its odd neighbour
and sits out, the q remaining ranks run the algorithm, and the result is handed back.

    python -m snippets run halving_doubling -n 6
"""

from __future__ import annotations

import argparse

import torch
import torch.distributed as dist
from torch.distributed import ReduceOp

from snippets.comm import plumbing
from snippets.comm.messages import (
    Send,
    bounds,
    exchange,
    gather_trace,
    recv,
    send,
    trace_rows,
    wait_all,
)
from snippets.comm.plumbing import begin, combine_, end
from snippets.comm.trace_frames import record_allreduce
from snippets.core import parts
from snippets.core.claims import law
from snippets.core.cli import main_entry
from snippets.core.runtime import Spec, device, print0

SPEC = Spec(
    summary="Rabenseifner's all-reduce: reduce-scatter by recursive halving, "
    "all-gather by recursive doubling",
    world_size=6,
)


# --8<-- [start:halving_doubling]
def halving_doubling_allreduce(
    tensor: torch.Tensor,
    op: ReduceOp = ReduceOp.SUM,
    group: dist.ProcessGroup | None = None,
    *,
    trace: list | None = None,
    check: bool = True,
) -> None:
    """In place, like ``dist.all_reduce``; ``trace`` gets one ``Send`` per message."""
    flat, ranks, me = begin(tensor, op, group, "halving_doubling_allreduce", check)
    p = len(ranks)
    if p > 1:
        _rabenseifner(flat, op, ranks, me, group, trace)
    end(tensor, flat, op, p)


def _rabenseifner(
    flat: torch.Tensor,
    op: ReduceOp,
    ranks: list[int],
    me: int,
    group: dist.ProcessGroup | None,
    trace: list | None,
) -> None:
    p, n = len(ranks), flat.numel()
    q = 1 << (p.bit_length() - 1)  # the largest power of two ≤ p
    r = p - q

    def real(v: int) -> int:  # virtual rank among the q → global rank
        return ranks[2 * v + 1 if v < r else v + r]

    step = 0
    if r:  # fold: rank 2i gives everything to rank 2i+1 and sits out
        step = 1
        if me < 2 * r and me % 2 == 0:
            wait_all([send(flat, 0, n, ranks[me + 1], group, trace, 0, "fold")])
        elif me < 2 * r:
            incoming = flat.new_empty(n)  # (n,)
            wait_all([recv(incoming, ranks[me - 1], group)])
            combine_(flat, incoming, op)
    v = me // 2 if me < 2 * r else me - r  # my virtual rank (or a folded even rank)
    if me >= 2 * r or me % 2 == 1:
        edge = bounds(n, q)  # q chunks; virtual rank v ends up owning chunk v
        lo, hi, mask = 0, q, q >> 1
        buf = flat.new_empty(edge[q // 2])  # (⌈n/2⌉,): every later half fits
        while mask:  # recursive halving: keep the half holding chunk v, send the other
            mid = (lo + hi) // 2
            keep, give = (
                ((lo, mid), (mid, hi)) if v & mask == 0 else ((mid, hi), (lo, mid))
            )
            partner = real(v ^ mask)
            a, b = edge[keep[0]], edge[keep[1]]
            into = buf[: b - a]
            g0, g1 = edge[give[0]], edge[give[1]]
            phase = "reduce-scatter"
            wait_all(
                exchange(
                    flat, g0, g1, partner, into, partner, group, trace, step, phase
                )
            )
            combine_(flat[a:b], into, op)  # (|kept half|,) ⊕= partner's copy of it
            lo, hi, mask, step = keep[0], keep[1], mask >> 1, step + 1
        mask = 1
        while mask < q:  # recursive doubling: swap what each has; the range doubles
            partner = real(v ^ mask)
            size = hi - lo
            plo = lo + size if v & mask == 0 else lo - size  # the partner's chunks
            into = flat[edge[plo] : edge[plo + size]]
            a, b, phase = edge[lo], edge[hi], "all-gather"
            wait_all(
                exchange(flat, a, b, partner, into, partner, group, trace, step, phase)
            )
            lo, hi, mask, step = min(lo, plo), max(hi, plo + size), mask << 1, step + 1
    if r:  # unfold: hand the result back to the ranks that sat out
        if me < 2 * r and me % 2 == 1:
            wait_all([send(flat, 0, n, ranks[me - 1], group, trace, step, "unfold")])
        elif me < 2 * r:
            wait_all([recv(flat, ranks[me + 1], group)])


# --8<-- [end:halving_doubling]


def main(numel: int = 1_000_003) -> dict:
    """Against dist.all_reduce for every op; then a trace: rounds vs the theory."""
    p, dev = dist.get_world_size(), device()
    x = plumbing.rank_input(numel)  # (n,) float64
    plumbing.check_every_op(halving_doubling_allreduce, x)
    n_small = 4 * p
    trace: list[Send] = []
    ones = torch.ones(n_small, dtype=torch.float64, device=dev)
    halving_doubling_allreduce(ones, trace=trace)
    merged = gather_trace(trace)
    q = 1 << (p.bit_length() - 1)
    rounds = len({s.step for s in merged})
    expected = 2 * (q.bit_length() - 1) + (2 if q < p else 0)
    law(
        rounds == expected,
        f"{rounds} rounds, expected 2·log2 q (+2 to fold and unfold) = {expected}",
    )
    rows = trace_rows(merged)
    print0(
        f"{p} ranks (q = {q}, {p - q} folded), {numel:,} float64: halving/doubling "
        "== dist.all_reduce"
    )
    print0(f"  for {', '.join(plumbing.REDUCE_OPS)}")
    print0(
        f"trace of a {n_small}-element all-reduce: {len(merged)} messages in {rounds} "
        f"rounds = 2·log2 {q}{' + 2' if q < p else ''}"
    )
    anim = record_allreduce(
        halving_doubling_allreduce, f"Halving/doubling all-reduce, {p} ranks"
    )
    print0(
        f"animation: {len(anim['frames']) - 1} rounds; last frame == dist.all_reduce"
    )
    return {
        "tables": {"trace": rows},
        "parts": {"animation": parts.player(anim)},
        "rounds": rounds,
        "world_size": p,
    }


def add_arguments(parser: argparse.ArgumentParser) -> None:
    plumbing.add_numel_argument(parser, 1_000_003)


if __name__ == "__main__":
    raise SystemExit(main_entry(main, SPEC))
