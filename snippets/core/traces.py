"""Chrome trace JSON: what ran on each rank, as Perfetto (ui.perfetto.dev) and
``chrome://tracing`` open it.

A trace is ``{"traceEvents": [...], "displayTimeUnit": "ms"}``. Each rank is a
process (``pid``), each kind of work a named thread (``tid``; a metadata event,
``"ph": "M"``, gives its name), and each span a complete event (``"ph": "X"``) with
its start ``ts`` and duration ``dur`` in µs. A snippet that stamps its work turns the
stamps into spans; how they are drawn and stored is decided here, once.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence


def chrome_trace(per_rank: list[list[dict]], threads: Sequence[str]) -> dict:
    """Per rank (a process), spans {"name", "tid", "ts", "dur"} in µs as complete
    events on the threads named by ``threads`` (thread i is ``threads[i]``)."""
    events = []
    for rank, spans in enumerate(per_rank):
        for tid, name in enumerate(threads):  # names the threads
            events.append({"name": "thread_name", "ph": "M", "pid": rank, "tid": tid,
                           "args": {"name": name}})  # fmt: skip
        for span in spans:
            if not 0 <= span["tid"] < len(threads):
                raise ValueError(f"span {span['name']!r}: thread {span['tid']} unnamed")
            events.append({"ph": "X", "pid": rank, **span})
    return {"traceEvents": events, "displayTimeUnit": "ms"}


def write_chrome_trace(path: str | Path, trace: dict) -> Path:
    """Write ``trace`` as JSON to ``path`` (its folder made if missing); the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(trace), encoding="utf-8")
    return path
