"""Chrome trace JSON built from spans placed by hand: each rank is a process with its
threads named, each span one complete event at its own time, nothing else; a span on
an unnamed thread is refused; the written file reads back as the same trace."""

from __future__ import annotations

import json

import pytest

from snippets.core.traces import chrome_trace, write_chrome_trace

PER_RANK = [
    [{"name": "F0", "tid": 0, "ts": 0.0, "dur": 2.5}],
    [
        {"name": "wait F0", "tid": 1, "ts": 0.0, "dur": 2.5},
        {"name": "F0", "tid": 0, "ts": 2.5, "dur": 3.0},
    ],
]


def test_every_span_is_one_complete_event_of_its_rank() -> None:
    trace = chrome_trace(PER_RANK, ("compute", "receive"))
    assert trace["displayTimeUnit"] == "ms"
    events = trace["traceEvents"]
    complete = sorted(
        (e["pid"], e["tid"], e["name"], e["ts"], e["dur"])
        for e in events
        if e["ph"] == "X"
    )
    assert complete == [
        (0, 0, "F0", 0.0, 2.5),
        (1, 0, "F0", 2.5, 3.0),
        (1, 1, "wait F0", 0.0, 2.5),
    ]
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e["ph"] == "M"}
    assert names == {
        (0, 0): "compute", (0, 1): "receive", (1, 0): "compute", (1, 1): "receive"
    }  # fmt: skip
    assert len(events) == 3 + 4  # nothing else


def test_a_span_on_an_unnamed_thread_is_refused() -> None:
    with pytest.raises(ValueError, match="'F0': thread 1"):
        chrome_trace([[{"name": "F0", "tid": 1, "ts": 0, "dur": 1}]], ("compute",))


def test_the_written_file_is_the_trace(tmp_path) -> None:
    trace = chrome_trace(PER_RANK, ("compute", "receive"))
    path = write_chrome_trace(tmp_path / "new" / "t.json", trace)
    assert path == tmp_path / "new" / "t.json"
    assert json.loads(path.read_text(encoding="utf-8")) == trace
