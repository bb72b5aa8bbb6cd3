"""Ring all-reduce: a reduce-scatter, then an all-gather, around a ring of p ranks.

Split the tensor into p chunks. In each of the first p−1 steps every rank sends one chunk
to its right-hand neighbour and adds the chunk arriving from its left into its own copy;
after them, rank r holds the full reduction of chunk r+1. The next p−1 steps pass the
finished chunks around the ring once more. That is 2(p−1) steps, in each of which every
rank sends n/p elements: 2(p−1)/p · n in all, the least any all-reduce can send per rank
(Patarasuk & Yuan 2009).

Segmentation: each chunk is cut into segments of ``segment_bytes``. A segment is forwarded
as soon as it has been reduced, so a large message pipelines through the ring instead of
waiting for whole chunks, and the additions overlap the transfers.

    python -m snippets run ring_allreduce -n 4
    torchrun --nproc-per-node 4 -m snippets.comm.ring_allreduce
"""

from __future__ import annotations

import argparse

import torch
import torch.distributed as dist
from torch.distributed import ReduceOp

from snippets.comm.plumbing import (
    Send,
    begin,
    bounds,
    combine_,
    end,
    recv,
    send,
    wait_all,
)
from snippets.core.cli import main_entry, positive_int
from snippets.core.runtime import Spec, device, print0

SPEC = Spec(
    summary="ring all-reduce: reduce-scatter then all-gather, segmented so it pipelines",
    world_size=4,
)

SEGMENT_BYTES = (
    1 << 20
)  # 1 MiB: pipelines well and keeps the landing buffers small (measured on gloo, CPU)


# --8<-- [start:ring]
def _pieces(a: int, b: int, seg: int) -> list[tuple[int, int]]:
    return [(s, min(s + seg, b)) for s in range(a, b, seg)]


def ring_allreduce(
    tensor: torch.Tensor,
    op: ReduceOp = ReduceOp.SUM,
    group: dist.ProcessGroup | None = None,
    *,
    segment_bytes: int = SEGMENT_BYTES,
    trace: list | None = None,
    check: bool = True,
) -> None:
    """In place, like ``dist.all_reduce``. ``trace``: a list that gets one ``Send`` per message."""
    flat, ranks, me = begin(tensor, op, group, "ring_allreduce", check)
    p = len(ranks)
    if p > 1:
        _ring(
            flat,
            op,
            ranks,
            me,
            group,
            max(1, segment_bytes // flat.element_size()),
            trace,
        )
    end(tensor, flat, op, p)


def _ring(
    flat: torch.Tensor,
    op: ReduceOp,
    ranks: list[int],
    me: int,
    group: dist.ProcessGroup | None,
    seg: int,
    trace: list | None,
    window: int = 4,
) -> None:
    p = len(ranks)
    right, left = ranks[(me + 1) % p], ranks[(me - 1) % p]
    edge = bounds(flat.numel(), p)  # chunk c is flat[edge[c]:edge[c+1]]
    steps = 2 * (p - 1)  # p−1 reduce-scatter steps, then p−1 all-gather steps
    # At step t I receive chunk (me − t − 1) mod p from the left and send chunk (me − t) mod p to the right,
    # segment by segment; `slots` lists every segment I will receive, in the order it arrives.
    slots = [
        (t, a, b)
        for t in range(steps)
        for a, b in _pieces(edge[(me - t - 1) % p], edge[(me - t - 1) % p + 1], seg)
    ]
    # Reduce-scatter segments land in a few small buffers used in turn (allocating n/p elements per call
    # would cost more than the additions); all-gather segments land where they belong.
    landing = [
        flat.new_empty(min(seg, edge[1] - edge[0])) for _ in range(window)
    ]  # window × (segment,)

    def post(k: int) -> dist.Work | None:
        t, a, b = slots[k]
        return recv(
            landing[k % window][: b - a] if t < p - 1 else flat[a:b], left, group
        )

    def phase(t: int) -> str:
        return "reduce-scatter" if t < p - 1 else "all-gather"

    sends = [
        send(flat, a, b, right, group, trace, 0, phase(0))
        for a, b in _pieces(edge[me], edge[me + 1], seg)
    ]
    pending = [
        post(k) for k in range(min(window, len(slots)))
    ]  # receives posted ahead: the pipeline's depth
    for k, (t, a, b) in enumerate(slots):
        pending[k].wait()
        if t < p - 1:
            combine_(
                flat[a:b], landing[k % window][: b - a], op
            )  # (segment,) ⊕= what came in
        if k + window < len(slots):
            pending.append(post(k + window))  # its landing buffer was freed just above
        if (
            t + 1 < steps
        ):  # forward this segment at once: it is part of the chunk I send next step
            sends.append(send(flat, a, b, right, group, trace, t + 1, phase(t + 1)))
    wait_all(sends)


# --8<-- [end:ring]


# --8<-- [start:theory]
def sent_per_rank(trace: list[Send], world_size: int) -> dict[int, int]:
    """Bytes each rank sent, from a trace merged across ranks."""
    out = {r: 0 for r in range(world_size)}
    for s in trace:
        out[s.src] += s.nbytes
    return out


# --8<-- [end:theory]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--numel",
        type=positive_int,
        default=1_000_003,
        help="elements to all-reduce (default 1,000,003)",
    )


def main(numel: int = 1_000_003) -> dict:
    """All-reduce a float64 tensor of an odd length with every op; compare with dist.all_reduce."""
    p, me, dev = dist.get_world_size(), dist.get_rank(), device()
    x = torch.randn(
        numel, dtype=torch.float64, generator=torch.Generator().manual_seed(me)
    ).to(dev)  # (n,)
    rows = []
    for name, op in (
        ("SUM", ReduceOp.SUM),
        ("PRODUCT", ReduceOp.PRODUCT),
        ("MIN", ReduceOp.MIN),
        ("MAX", ReduceOp.MAX),
        ("AVG", ReduceOp.AVG),
    ):
        ours, theirs = x.clone(), x.clone()
        ring_allreduce(ours, op, segment_bytes=256 * 1024)
        dist.all_reduce(theirs, op)
        err = (ours - theirs).abs().max().item()
        assert torch.allclose(ours, theirs, rtol=1e-12, atol=1e-12), (
            f"{name}: max |ours − torch| = {err}"
        )
        rows.append({"op": name, "max |ours − torch|": err})

    small = torch.arange(
        p + 2, dtype=torch.float64, device=dev
    )  # a short tensor: the trace fits in a table
    trace: list = []
    ring_allreduce(small, trace=trace)
    everyone: list = [None] * p
    dist.all_gather_object(everyone, trace)
    merged = sorted((s for t in everyone for s in t), key=lambda s: (s.step, s.src))
    assert len({s.step for s in merged}) == 2 * (p - 1), (
        "a ring all-reduce takes 2(p−1) steps"
    )
    steps = [
        {
            "step": s.step,
            "phase": s.phase,
            "send": f"{s.src} → {s.dst}",
            "elements": f"[{s.start}, {s.stop})",
            "bytes": s.nbytes,
        }
        for s in merged
    ]
    sent = sent_per_rank(merged, p)
    print0(
        f"ring all-reduce, {p} ranks, {numel:,} float64 elements: every op matches dist.all_reduce"
    )
    for row in rows:
        print0(f"  {row['op']:<8} max |ours − torch| = {row['max |ours − torch|']:.1e}")
    print0(
        f"trace of a {p + 2}-element all-reduce: {len(merged)} messages in {2 * (p - 1)} steps = 2(p−1); "
        f"bytes sent per rank {list(sent.values())}, 2(p−1)/p · n · 8 = {2 * (p - 1) / p * (p + 2) * 8:.1f}"
    )
    return {
        "tables": {"ops": rows, "trace": steps},
        "world_size": p,
        "sent_per_rank": sent,
    }


if __name__ == "__main__":
    raise SystemExit(main_entry(main, SPEC))
