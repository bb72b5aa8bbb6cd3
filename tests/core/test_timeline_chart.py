"""The timeline chart: a valid Vega-Lite spec in the house config, lanes in the
order given, kinds in the house palette, bad spans refused."""

from __future__ import annotations

import pytest

from snippets.core.chart_style import LIGHT, PALETTE
from snippets.core.charts import validate
from snippets.core.timeline_chart import timeline_chart

SPANS = [
    {"lane": "rank 1", "kind": "F", "label": "F0", "start": 1, "end": 2},
    {"lane": "rank 0", "kind": "B", "label": "B0", "start": 3, "end": 5},
    {"lane": "rank 0", "kind": "F", "label": "F0", "start": 0, "end": 1},
]


def test_a_valid_spec_with_lanes_kinds_and_extent() -> None:
    spec = timeline_chart(SPANS, title="t", x_label="time (ms)", kinds="FBW")
    validate(spec)
    assert spec["config"] == LIGHT
    enc = spec["encoding"]
    assert enc["y"]["sort"] == ["rank 1", "rank 0"]  # first appearance
    assert enc["color"]["scale"] == {"domain": ["F", "B", "W"], "range": PALETTE[:3]}
    assert enc["x"]["scale"]["domain"] == [0.0, 5.0]
    assert len(spec["data"]["values"]) == 3 and spec["height"] == 40 + 2 * 28


@pytest.mark.parametrize(
    ("spans", "kinds", "message"),
    [
        ([], None, "at least one span"),
        ([{**SPANS[0], "end": 0}], None, "ends before"),
        (SPANS, "F", "not in"),
    ],
)
def test_bad_spans_are_refused(spans, kinds, message) -> None:
    with pytest.raises(ValueError, match=message):
        timeline_chart(spans, title="t", x_label="x", kinds=kinds)
