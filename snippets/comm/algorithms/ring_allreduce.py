"""Ring all-reduce: a reduce-scatter, then an all-gather, around a ring of p ranks.

Split the tensor into p chunks (``bounds``). In each of the first p−1 steps every rank
sends one chunk to its right-hand neighbour and adds the chunk arriving from its left
into its own copy; after them, rank r holds the full reduction of chunk r+1. The next
p−1 steps pass the finished chunks around the ring once more. That is 2(p−1) steps,
in each of which every rank sends n/p elements: 2(p−1)/p · n in all, the least any
all-reduce can send per rank (Patarasuk & Yuan 2009).

Segmentation: each chunk is cut into segments of at most ``segment_bytes``
(``segments``). A segment is forwarded as soon as it has been reduced, so a large
message pipelines through the ring instead of waiting for whole chunks, and the
additions overlap the transfers.

Pacing: a send is posted at most ``lead`` messages ahead of my receives. gloo's TCP
transport moves a message only once its receive is posted, and a send posted before
that is written by gloo's one event-loop thread instead of by the thread that posted it.

    python -m snippets run ring_allreduce -n 4
    torchrun --nproc-per-node 4 -m snippets run ring_allreduce
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
    gather_trace,
    recv,
    segments,
    send,
    sent_per_rank,
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
    summary="ring all-reduce: reduce-scatter, then all-gather, in pipelined segments",
    world_size=4,
)

# 1 MiB: pipelines well and keeps the landing buffers small (measured on gloo, CPU)
SEGMENT_BYTES = 1 << 20
LEAD = 2  # sends posted at most this many messages ahead of my receives


# --8<-- [start:ring]
def ring_allreduce(
    tensor: torch.Tensor,
    op: ReduceOp = ReduceOp.SUM,
    group: dist.ProcessGroup | None = None,
    *,
    segment_bytes: int = SEGMENT_BYTES,
    lead: int | None = LEAD,
    trace: list | None = None,
    check: bool = True,
) -> None:
    """In place, like ``dist.all_reduce``; ``trace`` gets one ``Send`` per message.
    ``lead=None`` posts every send as soon as its data is ready."""
    if lead is not None and lead < 0:
        raise ValueError(f"lead must be None or at least 0, got {lead}")
    flat, ranks, me = begin(tensor, op, group, "ring_allreduce", check)
    seg = max(1, segment_bytes // flat.element_size())  # elements per segment
    if len(ranks) > 1:
        _ring(flat, op, ranks, me, group, seg, trace, lead)
    end(tensor, flat, op, len(ranks))


def _ring(
    flat: torch.Tensor,
    op: ReduceOp,
    ranks: list[int],
    me: int,
    group: dist.ProcessGroup | None,
    seg: int,
    trace: list | None,
    lead: int | None,
    window: int = 4,
) -> None:
    p = len(ranks)
    right, left = ranks[(me + 1) % p], ranks[(me - 1) % p]
    edge = bounds(flat.numel(), p)  # chunk c is flat[edge[c]:edge[c+1]]
    steps = 2 * (p - 1)  # p−1 reduce-scatter steps, then p−1 all-gather steps
    # At step t I receive chunk (me − t − 1) mod p from the left and send chunk
    # (me − t) mod p to the right, segment by segment; `slots` lists every segment
    # I will receive, in the order it arrives, and `outbox` every one I send, in order.
    slots = [
        (t, a, b)
        for t in range(steps)
        for a, b in segments(edge[(me - t - 1) % p], edge[(me - t - 1) % p + 1], seg)
    ]
    rs = sum(t < p - 1 for t, _, _ in slots)  # the slots that are added, not copied
    outbox = [(0, a, b) for a, b in segments(edge[me], edge[me + 1], seg)]
    # Reduce-scatter segments land in a few small buffers used in turn (allocating
    # n/p elements per call costs more than the additions); all-gather segments land
    # where they belong.
    size = min(seg, edge[1] - edge[0])
    landing = [flat.new_empty(size) for _ in range(window)]  # window × (segment,)
    pending: list = []  # posted receives, slot by slot
    sends: list = []  # posted sends, message by message

    def post(upto: int) -> None:
        while len(pending) < min(upto, len(slots)):
            t, a, b = slots[len(pending)]
            into = landing[len(pending) % window][: b - a] if t < p - 1 else flat[a:b]
            pending.append(recv(into, left, group))

    def flush(upto: int) -> None:
        upto = len(outbox) if lead is None else upto
        while len(sends) < min(upto, len(outbox)):
            t, a, b = outbox[len(sends)]
            phase = "reduce-scatter" if t < p - 1 else "all-gather"
            sends.append(send(flat, a, b, right, group, trace, t, phase))

    # gloo's transport moves a message only once its receive is posted, and a send
    # posted before that is written later by its one event-loop thread. So I keep my
    # sends at most `lead` ahead of my receives, which my neighbour posts in step with
    # mine, and more of the writing is left to this thread (see ring_profile).
    post(window)  # receives posted ahead: the pipeline's depth
    flush(len(pending) + (lead or 0))
    for k, (t, a, b) in enumerate(slots):
        pending[k].wait()
        if t < p - 1:  # (segment,) ⊕= what came in
            combine_(flat[a:b], landing[k % window][: b - a], op)
        # the next landing buffer was freed just above; all-gather receives need
        # none, so once they come up they are posted all at once
        post(k + 1 + window if k + 1 + window <= rs else len(slots))
        if t + 1 < steps:  # forward it: it is part of the chunk I send next
            outbox.append((t + 1, a, b))
        flush(len(pending) + (lead or 0))
    flush(len(outbox))
    wait_all(sends)


# --8<-- [end:ring]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    plumbing.add_numel_argument(parser, 1_000_003)


def main(numel: int = 1_000_003) -> dict:
    """An odd-length float64 all-reduce with every op against dist.all_reduce; then
    the trace of a short one against the theory: 2(p−1) steps, 2(p−1)/p · n per rank."""
    p, dev = dist.get_world_size(), device()
    x = plumbing.rank_input(numel)  # (n,) float64
    errors = plumbing.check_every_op(ring_allreduce, x, segment_bytes=256 * 1024)
    rows = [{"op": op, "max |ours − torch|": e} for op, e in errors.items()]
    small = torch.arange(p + 2, dtype=torch.float64, device=dev)  # a table-sized trace
    trace: list[Send] = []
    ring_allreduce(small, trace=trace)
    merged = gather_trace(trace)
    steps = len({s.step for s in merged})
    law(steps == 2 * (p - 1), f"{steps} steps; a ring all-reduce takes 2(p−1)")
    table = trace_rows(merged)
    sent = sent_per_rank(merged, p)
    print0(
        f"ring all-reduce, {p} ranks, {numel:,} float64: every op == dist.all_reduce"
    )
    for row in rows:
        print0(f"  {row['op']:<8} max |ours − torch| = {row['max |ours − torch|']:.1e}")
    ideal = 2 * (p - 1) / p * (p + 2) * 8
    print0(
        f"trace of a {p + 2}-element all-reduce: {len(merged)} messages in "
        f"{steps} steps = 2(p−1)"
    )
    print0(f"bytes sent per rank {list(sent.values())}; 2(p−1)/p · n · 8 = {ideal:.1f}")
    anim = record_allreduce(ring_allreduce, f"Ring all-reduce, {p} ranks, {p} elements")
    print0(f"animation: {len(anim['frames']) - 1} steps; last frame == dist.all_reduce")
    return {
        "tables": {"ops": rows, "trace": table},
        "parts": {"animation": parts.player(anim)},
        "world_size": p,
        "sent_per_rank": sent,
    }


if __name__ == "__main__":
    raise SystemExit(main_entry(main, SPEC))
