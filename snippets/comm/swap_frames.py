"""Point-to-point as animations: the deliberate deadlock, replayed from a run that
the runtime stopped, and the isend/irecv swap that fixes it.

Each rank's row has p slots, slot j for rank j's tensor; a rank starts with its own.
The fix's last frame must hold, in the peer's slot, what the peer sent, as
``all_gather_object`` reports it (not through the swap under test).

``record_stopped`` launches the deadlocking exchange on two fresh ranks whose group
times out after a few seconds. Each rank writes its sends to a file as it notes them,
so a rank the runtime stopped still leaves them behind: they are drawn as ``blocked``
(nothing delivered). The last frame draws both ranks stopped, how long after its send
each was stopped, and the one line of the ``RankError`` that ``launch`` raised. A rank
cannot launch ranks of its own, so a rank starts it with ``runtime.start_apart``.
"""

from __future__ import annotations

import importlib
import json
import re
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import Callable

import torch
import torch.distributed as dist

from snippets.comm.messages import Send, gather_trace
from snippets.comm.trace_frames import animation
from snippets.core.claims import LawBroken
from snippets.core.player import check_animation
from snippets.core.runtime import RankError, device, launch


def _row(p: int, fill: dict[int, float]) -> list:
    return [fill.get(j) for j in range(p)]


def _start(p: int) -> list:
    return [[[q] if j == q else [] for j in range(p)] for q in range(p)]


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


def one_line(text: str, width: int = 88) -> str:
    """An error's first line without gloo's ``[file.cc:123]`` prefixes, cut to
    ``width`` columns."""
    text = re.sub(r"\[[^\]]*:\d+\]\s*", "", text.splitlines()[0] if text else "")
    return text if len(text) <= width else text[: width - 1] + "…"


class _Noted(list):
    """A ``trace=`` list that also writes each Send, and when, to ``path`` at once."""

    def __init__(self, path: Path) -> None:
        super().__init__()
        self.path = path

    def append(self, s: Send) -> None:
        super().append(s)
        with open(self.path, "a") as f:
            f.write(json.dumps([time.monotonic(), asdict(s)]) + "\n")


def _stuck_rank(exchange: str, notes: str) -> None:
    """One launched rank: ``exchange`` ("module:function", called like
    ``both_send_first``) with its peer, in the world group and its timeout."""
    module, name = exchange.split(":")
    fn = getattr(importlib.import_module(module), name)
    r = dist.get_rank()
    trace = _Noted(Path(notes, f"rank{r}"))
    fn(torch.ones(1), torch.empty(1), r ^ 1, dist.group.WORLD, trace)


def record_stopped(exchange: str, timeout_s: float) -> dict:
    """Launch ``exchange`` on two fresh gloo ranks with a ``timeout_s`` group timeout;
    return its frames, ending with the ranks as the runtime stopped them. Raises
    AssertionError if the exchange returned. Call it where no ranks run (a rank:
    through ``start_apart``)."""
    with tempfile.TemporaryDirectory(prefix="commonplace-stuck-") as notes:
        try:
            launch(_stuck_rank, 2, "gloo", timeout_s, args=(exchange, notes))
        except RankError as exc:
            stopped, error = time.monotonic(), exc
        else:
            raise LawBroken(f"{exchange} returned: nothing deadlocked")
        noted = [
            (r, json.loads(line))
            for r in range(2)
            if Path(notes, f"rank{r}").exists()
            for line in Path(notes, f"rank{r}").read_text().splitlines()
        ]
    trace = [Send(**{**s, "phase": "blocked"}) for _, (_, s) in noted]
    began = {r: min(t for q, (t, _) in noted if q == r) for r, _ in noted}
    after = [stopped - began[r] if r in began else None for r in range(2)]
    inputs = [_row(2, {q: 1.0}) for q in range(2)]
    anim = animation(
        sorted(trace, key=lambda s: (s.step, s.src)),
        inputs,
        inputs,  # nothing arrived before the ranks were stopped
        "both ranks call send first; neither reaches recv, and after the group's "
        f"{timeout_s:g} s timeout the runtime stops the run",
        start=_start(2),
        slots=[f"rank {j}'s" for j in range(2)],
    )
    anim["frames"].append(
        {
            "label": one_line(str(error)),
            "messages": [],
            "cells": anim["frames"][-1]["cells"],
            "stopped": [
                "stopped" if a is None else f"stopped after {a:.1f} s" for a in after
            ],
        }
    )
    check_animation(anim, inputs)
    return anim | {"error": str(error), "error_rank": error.rank, "after_s": after}
