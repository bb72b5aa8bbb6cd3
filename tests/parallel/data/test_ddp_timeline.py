"""The timeline's arithmetic on stamps made up by hand, then one real step on 2 ranks:
every bucket stamped in order, and a Chrome trace that holds them all."""

from __future__ import annotations

import json

import pytest

from snippets.core.runtime import launch
from snippets.parallel.data import ddp_timeline
from snippets.parallel.data.ddp_timeline import bucket_trace, hidden_fraction, spans

T0 = 1_000_000  # ns
STAMPS = [  # bucket 1 became ready first; times in ns after T0
    {"bucket": 0, "ready": T0 + 4_000, "start": T0 + 5_000, "end": T0 + 9_000},
    {"bucket": 1, "ready": T0 + 1_000, "start": T0 + 2_000, "end": T0 + 4_000},
]


def test_spans_are_in_ready_order_and_in_microseconds() -> None:
    rows = spans(STAMPS, T0)
    assert [r["bucket"] for r in rows] == [1, 0]
    assert rows[0] == {"bucket": 1, "compute_from": 0.0, "ready": 1.0, "start": 2.0,
                       "end": 4.0}  # fmt: skip
    assert rows[1]["compute_from"] == 1.0 and rows[1]["end"] == 9.0


def test_hidden_fraction_is_the_overlap_with_backward() -> None:
    rows = spans(STAMPS, T0)  # backward computes until 4 µs
    # bucket 1's 2 µs all-reduce lies inside; bucket 0's 4 µs starts after: 2 / 6
    assert hidden_fraction(rows) == pytest.approx(2 / 6)


def test_bucket_trace_has_one_event_per_span() -> None:
    trace = bucket_trace([spans(STAMPS, T0)] * 3)
    spans_x = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert len(spans_x) == 3 * 2 * 2 and {e["pid"] for e in spans_x} == {0, 1, 2}
    comm = [e for e in spans_x if e["tid"] == 1 and e["pid"] == 0]
    assert sorted((e["ts"], e["dur"]) for e in comm) == [(2.0, 2.0), (5.0, 4.0)]
    json.dumps(trace)  # plain JSON, as Perfetto reads it


def test_a_real_step_is_stamped_in_order(tmp_path) -> None:
    path = tmp_path / "trace.json"
    result = launch(ddp_timeline.main, 2, "gloo", 60, args=(0.25, 2, str(path)))[0]
    rows = result["tables"]["timeline"]
    assert {r["rank"] for r in rows} == {0, 1} and len(rows) % 2 == 0
    for r in rows:
        assert 0 <= r["compute_from"] <= r["ready"] <= r["start"] <= r["end"], r
    assert all(0.0 <= h <= 1.0 for h in result["hidden_fraction"])
    written = json.loads(path.read_text())
    assert written == result["chrome_trace"]


def test_the_overlap_chart_draws_every_stamp_of_every_rank() -> None:
    table = [{"rank": r, **row} for r in (0, 1) for row in spans(STAMPS, T0)]
    spec = ddp_timeline.overlap_chart(table)
    drawn = {
        (s["lane"], s["label"], s["start"], s["end"]) for s in spec["data"]["values"]
    }
    want = {(f"rank {r} backward", "bucket 1", 0.0, 0.001) for r in (0, 1)}
    want |= {(f"rank {r} all-reduce", "bucket 0", 0.005, 0.009) for r in (0, 1)}
    assert want <= drawn and len(drawn) == 2 * 2 * 2
