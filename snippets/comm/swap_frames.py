"""Point-to-point as animations: the deliberate deadlock, replayed from the run that
timed out, and the isend/irecv swap that fixes it.

Each rank's row has p slots, slot j for rank j's tensor; a rank starts with its own.
In the deadlock every send was noted before it blocked; a rank whose group timed out
never returned from it, so its send is replayed as ``blocked`` and delivers nothing.
The last frame must show exactly that: every rank that timed out still without its
peer's tensor. The fix's last frame must hold, in the peer's slot, what the peer
sent, as ``all_gather_object`` reports it (not through the swap under test).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Callable

import torch
import torch.distributed as dist

from snippets.comm.messages import Send, gather_trace
from snippets.comm.trace_frames import animation, check_animation
from snippets.core.runtime import device


def _row(p: int, fill: dict[int, float]) -> list:
    return [fill.get(j) for j in range(p)]


def _start(p: int) -> list:
    return [[[q] if j == q else [] for j in range(p)] for q in range(p)]


def record_deadlock(trace: list[Send], error: str, sent: float, timeout: str) -> dict:
    """Frames of ``both_send_first`` as it ran: ``trace`` its noted sends, ``error``
    this rank's timeout message ('' if its send returned), ``sent`` the value sent."""
    p = dist.get_world_size()
    mine = [replace(s, phase="blocked") if error else s for s in trace]
    merged = gather_trace(mine)
    everyone: list = [None] * p
    dist.all_gather_object(everyone, bool(error))
    inputs = [_row(p, {q: sent}) for q in range(p)]
    anim = animation(
        merged,
        inputs,
        inputs,  # the run's buffers: each its own; nothing arrived where it blocked
        f"both ranks call send first: neither reaches recv; the {timeout} timeout "
        "ends both",
        start=_start(p),
        slots=[f"rank {j}'s" for j in range(p)],
    )
    check_animation(anim, inputs)
    last = anim["frames"][-1]["cells"]
    for s in merged:
        if everyone[s.dst] and (s.phase != "blocked" or last[s.dst][s.src] != []):
            raise AssertionError(f"rank {s.dst} timed out, yet the frames deliver {s}")
    return anim


def record_swap(swap: Callable[..., None], peer: int) -> dict:
    """Frames of ``swap(mine, theirs, peer, trace=)`` (the isend/irecv fix) on every
    rank; the odd rank out of an odd world sits it out."""
    p, me = dist.get_world_size(), dist.get_rank()
    mine = torch.tensor([10.0 * me + 1], dtype=torch.float64, device=device())
    theirs, trace = torch.full_like(mine, float("nan")), []
    if peer < p:
        swap(mine, theirs, peer, trace=trace)
    merged = gather_trace(trace)
    everyone: list = [None] * p
    got = theirs.item() if peer < p else None
    dist.all_gather_object(everyone, (mine.item(), got))
    sent = [v for v, _ in everyone]
    partner = [q ^ 1 if q ^ 1 < p else q for q in range(p)]
    inputs = [_row(p, {q: sent[q]}) for q in range(p)]
    final = [_row(p, {partner[q]: everyone[q][1], q: sent[q]}) for q in range(p)]
    oracle = [_row(p, {partner[q]: sent[partner[q]], q: sent[q]}) for q in range(p)]
    anim = animation(
        merged,
        inputs,
        final,
        "the fix: isend and irecv on both ranks, then wait; both swaps complete",
        start=_start(p),
        slots=[f"rank {j}'s" for j in range(p)],
    )
    check_animation(anim, oracle)
    return anim
