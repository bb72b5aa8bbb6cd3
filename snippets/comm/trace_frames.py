"""Animations from executed traces: a merged trace of ``Send``s, replayed step by step
from the ranks' first buffers, as the frames the page's player draws
(:mod:`snippets.core.player`).

Every element of every rank's buffer is tracked as the list of ranks whose input it
holds summed so far (a rank appears twice if its input was added twice: a bug the
final-frame check catches). In each step every message reads the sender's buffer as
it was before the step; an ``add`` message is summed into the receiver's same range,
a ``copy`` overwrites it. The phase a snippet names on each ``Send`` says which
(``ACTIONS``); an unknown phase is an error, not a guess. A ``blocked`` message was
posted and never matched: the receiver gets nothing.

Buffers need not start full: ``start`` gives each rank's first cells, where ``[]`` is
an empty piece (a gather's slots before anything arrived). A frame may carry its own
``values`` (what a run recorded at that step, as ring attention's running
log-sum-exp); otherwise a cell's value is the sum of the inputs it names. A final
value of ``None`` is a place the collective leaves undefined, and is not compared.

``record_allreduce`` runs one all-reduce with ``trace=`` on every rank, gathers the
trace, the first and final buffers and ``dist.all_reduce``'s answer, and returns the
animation only if its last frame equals both: the frames cannot disagree with the run.
"""

from __future__ import annotations

from typing import Callable

import torch
import torch.distributed as dist

from snippets.comm.messages import Send, gather_trace
from snippets.core.player import check_animation, player_data
from snippets.core.runtime import device

# --8<-- [start:actions]
ACTIONS = {  # phase named on a Send → what the receiver does with it
    "reduce": "add",
    "reduce-scatter": "add",
    "fold": "add",
    "everyone": "add",
    "broadcast": "copy",
    "all-gather": "copy",
    "unfold": "copy",
    "scatter": "copy",
    "gather": "copy",
    "all-to-all": "copy",
    "send": "copy",
    "isend": "copy",
    "blocked": "blocked",
}


def replay(
    trace: list[Send], p: int, numel: int, start: list | None = None
) -> list[list[list[list[int]]]]:
    """states[k][rank][i]: the ranks whose inputs element i holds after k steps
    (states[0]: ``start``, by default each rank its own); one state per distinct
    step of the trace."""
    state = start or [[[r] for _ in range(numel)] for r in range(p)]
    states = [state]
    for step in sorted({s.step for s in trace}):
        before, state = state, [[list(c) for c in row] for row in state]
        for s in (s for s in trace if s.step == step):
            if s.phase not in ACTIONS:
                raise ValueError(f"phase {s.phase!r} of {s} is not in ACTIONS")
            if ACTIONS[s.phase] == "blocked":
                continue
            for i in range(s.start, s.stop):
                got = before[s.src][i]
                add = ACTIONS[s.phase] == "add"
                state[s.dst][i] = sorted(state[s.dst][i] + got) if add else list(got)
        states.append(state)
    return states


# --8<-- [end:actions]


def animation(
    trace: list[Send],
    inputs: list[list[float]],
    final: list[list[float]],
    title: str,
    start: list | None = None,
    slots: list[str] | None = None,
) -> dict:
    """The trace replayed as the player's data: frame 0 is the start; frame k shows
    step k's messages and the buffers after them. ``final``: what the run's tensors
    held at the end; ``slots``: names drawn over the cells' columns."""
    p, numel = len(inputs), len(inputs[0])
    states = replay(trace, p, numel, start)
    steps = sorted({s.step for s in trace})
    frames = [{"label": "start", "messages": [], "cells": states[0]}]
    for k, step in enumerate(steps, 1):
        sends = [s for s in trace if s.step == step]
        phases = " + ".join(dict.fromkeys(s.phase for s in sends))
        frames.append(
            {
                "label": f"step {k} of {len(steps)} · {phases}",
                "messages": [
                    {
                        "src": s.src,
                        "dst": s.dst,
                        "start": s.start,
                        "stop": s.stop,
                        "bytes": s.nbytes,
                        "action": ACTIONS[s.phase],
                    }
                    for s in sends
                ],
                "cells": states[k],
            }
        )
    return player_data(frames, inputs, final, title, slots)


def record_allreduce(fn: Callable[..., None], title: str, numel: int = 0, **kw) -> dict:
    """Run ``fn`` (an all-reduce taking ``trace=``) on small integer-valued inputs on
    every rank; return its checked animation (on every rank)."""
    p, rank = dist.get_world_size(), dist.get_rank()
    numel = numel or p
    # integer-valued float64: sums are exact, and every (rank, element) is different
    x = torch.arange(numel, dtype=torch.float64, device=device()) * 10 + rank + 1
    ours, oracle, trace = x.clone(), x.clone(), []
    fn(ours, trace=trace, **kw)
    dist.all_reduce(oracle)
    merged = gather_trace(trace)
    everyone: list = [None] * p
    dist.all_gather_object(everyone, (x.tolist(), ours.tolist(), oracle.tolist()))
    inputs, final, expected = (list(t) for t in zip(*everyone))
    anim = animation(merged, inputs, final, title)
    check_animation(anim, expected)
    return anim
