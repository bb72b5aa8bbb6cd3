"""The player: a run replayed frame by frame in the page, ranks as rows of cells and
messages as arrows between them (``docs/assets/player/player.js`` draws it).

A snippet records what ran and turns it into frames; this module holds what every
animation shares: its data and the check that it agrees with the run. A snippet returns
it as a part, ``snippets.core.parts.player(trace)``; ``snippets.render`` writes the
figure a note includes. The data, as the player reads it::

    {"title": str, "ranks": p, "numel": cells per rank,
     "colors": [one per rank, the house palette], "slots": [a name per column]?,
     "inputs": [[first value of each cell] per rank],
     "final": [[what the run's buffers held at the end] per rank],
     "final_labels": [[the last frame's cells as rank ranges] per rank],
     "frames": [{"label": str,
                 "messages": [{"src", "dst", "start", "stop", "bytes", "action"}],
                 "cells": [[[the ranks whose inputs the cell holds] per cell] per rank],
                 "values": [[value per cell] per rank]?,  # recorded, if not sums
                 "stopped": [what stopped each rank]?}]}

A message's ``action`` is ``add`` (summed into the receiver's cells ``start:stop``),
``copy`` (overwrites them) or ``blocked`` (posted, never matched: nothing arrives). A
cell's value is the sum of the inputs it names unless the frame records ``values``;
``None`` is a cell the run leaves undefined, and is not compared.
"""

from __future__ import annotations

from snippets.core.chart_style import PALETTE
from snippets.core.claims import LawBroken


def label(cell: list[int]) -> str:
    """The ranks in a cell as ranges: [0, 1, 2, 4] → "0–2,4"; a repeat shows twice."""
    runs: list[list[int]] = []
    for r in cell:
        if runs and r == runs[-1][-1] + 1:
            runs[-1].append(r)
        else:
            runs.append([r])
    return ",".join(
        f"{g[0]}–{g[-1]}" if len(g) > 2 else ",".join(map(str, g)) for g in runs
    )


def frame_values(cells: list[list[list[int]]], inputs: list[list[float]]) -> list:
    """What each rank's buffer holds in a frame: element i sums inputs[r][i] over r
    (``None`` where it holds nothing)."""
    return [
        [
            sum(inputs[r][i] for r in cell) if cell else None
            for i, cell in enumerate(row)
        ]
        for row in cells
    ]


def player_data(
    frames: list[dict],
    inputs: list[list],
    final: list[list],
    title: str,
    slots: list[str] | None = None,
) -> dict:
    """The player's data from ``frames`` (frame 0 is the start), one row of
    ``inputs`` and of ``final`` per rank; the last frame's cells are its labels."""
    p = len(inputs)
    return {
        "title": title,
        "ranks": p,
        "numel": len(inputs[0]),
        "colors": [PALETTE[r % len(PALETTE)] for r in range(p)],
        "inputs": inputs,
        "final": final,
        "final_labels": [[label(c) for c in row] for row in frames[-1]["cells"]],
        "frames": frames,
    } | ({"slots": slots} if slots else {})


def check_animation(anim: dict, expected: list[list[float]]) -> None:
    """Raise AssertionError unless the last frame's buffers equal ``expected`` (the
    oracle's) and the run's recorded ``final`` buffers, element for element."""
    last = anim["frames"][-1]
    drawn = last.get("values") or frame_values(last["cells"], anim["inputs"])
    for what, want in (("the oracle", expected), ("the run", anim["final"])):
        bad = [
            (r, i, got, w)
            for r, (row, wrow) in enumerate(zip(drawn, want))
            for i, (got, w) in enumerate(zip(row, wrow))
            if w is not None and got != w
        ]
        if bad or len(drawn) != len(want):
            r, i, got, w = (bad or [(len(drawn), 0, None, None)])[0]
            raise LawBroken(
                f"{anim['title']}: last frame ≠ {what} ({len(bad)} elements; rank {r} "
                f"element {i}: drawn {got}, recorded {w})"
            )
