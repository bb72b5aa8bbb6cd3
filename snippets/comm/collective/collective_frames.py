"""The seven data-moving collectives, recorded as animations: each hand-made one runs
with ``trace=`` on small integer-valued pieces next to torch's own, and its
animation is returned only if the last frame equals both.

Every rank's row is laid out as the pieces the collective moves:

- broadcast, reduce: the tensor's elements; everyone starts with its own.
- scatter, gather, all_gather, reduce_scatter: p slots, slot j the piece that belongs
  to rank j. A gather starts with only its own slot full; a scatter with only the
  root's row full; a reduce-scatter with every slot full and summing.
- all_to_all: p² slots, slot i·p + j the piece rank i sends to rank j, so the
  exchange reads as a transpose: rank i starts with slots i·p … and ends holding the
  column i, p + i, 2p + i, … as well.

A place the collective leaves undefined (a reduce's non-root tensors, a
reduce-scatter's pieces that are not the rank's own) is ``None`` in the recorded
final buffers and is not compared: the row shows the partial that rank sent on.
"""

from __future__ import annotations

from typing import Callable

import torch
import torch.distributed as dist

from snippets.comm.collective.rooted_collectives import (
    broadcast,
    gather,
    reduce,
    scatter,
)
from snippets.comm.collective.symmetric_collectives import (
    all_gather,
    all_to_all,
    reduce_scatter,
)
from snippets.comm.messages import gather_trace
from snippets.comm.trace_frames import animation
from snippets.core.player import check_animation
from snippets.core.runtime import device


def _piece(value: float, n: int = 1) -> torch.Tensor:
    """(n,) float64: value, value + 1, …; integers, so every sum is exact."""
    return torch.arange(n, dtype=torch.float64, device=device()) + value


def _val(t: torch.Tensor) -> float:
    return t.item()


def _slots(p: int, fill: dict[int, float]) -> list:
    return [fill.get(j) for j in range(p)]


# Each case runs ours and torch's on rank `me` and returns this rank's (inputs, start,
# ours, torch's) rows; None in a start row: the default (every element its own).
def _broadcast(trace: list, p: int, me: int, root: int) -> tuple:
    x = _piece(10 * me + 1, 2)
    ours, theirs = x.clone(), x.clone()
    broadcast(ours, src=root, trace=trace)
    dist.broadcast(theirs, src=root)
    return x.tolist(), None, ours.tolist(), theirs.tolist()


def _reduce(trace: list, p: int, me: int, root: int) -> tuple:
    x = _piece(10 * me + 1, 2)
    ours, theirs = x.clone(), x.clone()
    reduce(ours, dst=root, trace=trace)
    dist.reduce(theirs, dst=root)
    kept = (lambda t: t.tolist()) if me == root else (lambda t: [None] * 2)
    return x.tolist(), None, kept(ours), kept(theirs)


def _scatter(trace: list, p: int, me: int, root: int) -> tuple:
    pieces = [_piece(10 * root + j + 1) for j in range(p)] if me == root else None
    ours, theirs = torch.empty(1, **_like()), torch.empty(1, **_like())
    scatter(ours, pieces, src=root, trace=trace)
    dist.scatter(theirs, pieces, src=root)
    held = {j: _val(t) for j, t in enumerate(pieces)} if me == root else {}
    inputs = _slots(p, held)
    start = [[root] if me == root else [] for _ in range(p)]
    return (
        inputs,
        start,
        _slots(p, held | {me: _val(ours)}),
        _slots(p, held | {me: _val(theirs)}),
    )


def _gather(trace: list, p: int, me: int, root: int, everyone: bool = False) -> tuple:
    x = _piece(10 * me + 1)
    outs = [[torch.empty(1, **_like()) for _ in range(p)] for _ in range(2)]
    if everyone:
        all_gather(outs[0], x, trace=trace)
        dist.all_gather(outs[1], x)
    else:
        gather(x, outs[0] if me == root else None, dst=root, trace=trace)
        dist.gather(x, outs[1] if me == root else None, dst=root)
    kept = everyone or me == root
    rows = [
        _slots(p, {j: _val(t) for j, t in enumerate(o)} if kept else {me: _val(x)})
        for o in outs
    ]
    start = [[me] if j == me else [] for j in range(p)]
    return _slots(p, {me: _val(x)}), start, *rows


def _all_gather(trace: list, p: int, me: int, root: int) -> tuple:
    return _gather(trace, p, me, root, everyone=True)


def _reduce_scatter(trace: list, p: int, me: int, root: int) -> tuple:
    pieces = [_piece(10 * me + c + 1) for c in range(p)]
    ours, theirs = torch.empty(1, **_like()), torch.empty(1, **_like())
    reduce_scatter(ours, pieces, trace=trace)
    dist.reduce_scatter(theirs, pieces)
    inputs = [_val(t) for t in pieces]
    return inputs, None, _slots(p, {me: _val(ours)}), _slots(p, {me: _val(theirs)})


def _all_to_all(trace: list, p: int, me: int, root: int) -> tuple:
    ins = [_piece(10 * me + j + 1) for j in range(p)]
    outs = [[torch.empty(1, **_like()) for _ in range(p)] for _ in range(2)]
    all_to_all(outs[0], ins, trace=trace)
    dist.all_to_all(outs[1], ins)
    mine = {me * p + j: _val(t) for j, t in enumerate(ins)}  # my row of the p × p
    start = [[me] if k in mine else [] for k in range(p * p)]
    rows = [
        _slots(p * p, {i * p + me: _val(t) for i, t in enumerate(o)} | mine)
        for o in outs
    ]
    return _slots(p * p, mine), start, *rows


def _like() -> dict:
    return {"dtype": torch.float64, "device": device()}


CASES: dict[str, Callable[..., tuple]] = {
    "broadcast": _broadcast,
    "scatter": _scatter,
    "gather": _gather,
    "reduce": _reduce,
    "all_gather": _all_gather,
    "reduce_scatter": _reduce_scatter,
    "all_to_all": _all_to_all,
}


# --8<-- [start:record]
def record_collective(name: str, root: int | None = None) -> dict:
    """Run collective ``name`` (one of ``CASES``) with ``trace=`` on every rank, and
    torch's own on the same pieces; return its animation, checked against both."""
    p, me = dist.get_world_size(), dist.get_rank()
    root = p - 1 if root is None else root  # a root that is not rank 0
    trace: list = []
    mine = CASES[name](trace, p, me, root)
    merged = gather_trace(trace)
    everyone: list = [None] * p
    dist.all_gather_object(everyone, mine)
    inputs, start, ours, theirs = (list(t) for t in zip(*everyone))
    title = f"{name}, {p} ranks" + (f", root {root}" if name in ROOTED else "")
    slots = None
    if name == "all_to_all":
        slots = [f"{i}→{j}" for i in range(p) for j in range(p)]
        title += ": column i·p + j is the piece rank i sends to rank j"
    elif len(inputs[0]) == p and name not in ("broadcast", "reduce"):
        slots = [f"piece {j}" for j in range(p)]
    begin = None if start[0] is None else start
    anim = animation(merged, inputs, ours, title, start=begin, slots=slots)
    check_animation(anim, theirs)  # and, inside, against the run's own buffers
    return anim


# --8<-- [end:record]

ROOTED = ("broadcast", "scatter", "gather", "reduce")
