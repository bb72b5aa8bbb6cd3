"""What a snippet returns for a page beyond tables and charts: parts, each a kind and
its data, never HTML.

A ``main()`` returns them under ``"parts"`` (``results/<name>.<part>.md``, one per
name)::

    {"parts": {"animation": player(trace), "graph": viewer(graph, start)}}

A part is a plain dict, ``{"kind": str, "data": ...}``, that JSON holds as it is:
rank 0's value travels between processes and into ``results/<name>.json`` unchanged.
``snippets/render`` turns each kind into the fragment its script reads; its table,
``snippets/render/kinds.py``, gives each kind's marker and assets.
"""

from __future__ import annotations

from typing import Any, Literal, TypedDict

from snippets.core.runtime import print0

Kind = Literal["player", "viewer", "predict", "sizing"]


class Part(TypedDict):
    kind: Kind
    data: Any  # JSON-able


def player(trace: dict) -> Part:
    """A run replayed frame by frame (``snippets.core.player.player_data``)."""
    return {"kind": "player", "data": trace}


def viewer(graph: dict, start: dict | None = None) -> Part:
    """A model's graph (``snippets.viewer.graph_export``) and the degrees the overlay
    opens with (``{"tp": 2, "pp": 2}``; ``None``: the viewer's own)."""
    return {"kind": "viewer", "data": {"graph": graph, "start": start}}


def prediction(
    id: str, question: str, unit: str, answer: float, why: str, source: str
) -> Part:
    """A question the reader answers before the answer (computed by ``source``) and
    how it comes out (``why``) are shown."""
    data = {"id": id, "question": question, "unit": unit, "answer": answer}
    return {"kind": "predict", "data": data | {"why": why, "source": source}}


def sizing(config: dict) -> Part:
    """The sizing calculator's configuration: presets, defaults, the CLI's options."""
    return {"kind": "sizing", "data": config}


class Excerpt:
    """Printed lines a note shows, kept as they are printed: ``said(line)`` prints on
    rank 0 (``print0``) and keeps the line; a ``main()`` returns them under
    ``"excerpts"`` (``{"summary": said.lines}``), rendered as the run's output block,
    so a note names the part and never counts lines of the output."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def __call__(self, line: str) -> None:
        print0(line)
        self.lines.append(line)
