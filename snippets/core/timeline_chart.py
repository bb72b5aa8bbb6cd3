"""A timeline (Gantt) chart: one row per lane (a rank, a stream), one rectangle per
span of work, coloured by its kind, as a Vega-Lite spec in the house style.

It follows ``snippets.core.charts``: the same config, schema check and usermeta (so
the page draws it, switches its colours in the dark scheme and lists the numbers for
readers who cannot see it). Lanes keep the order they first appear in; kinds take the
house palette in the order given; hovering a span shows its label and times; the time
axis spans exactly the data.
"""

from __future__ import annotations

from typing import Any, Sequence

import altair as alt

from snippets.core.chart_style import PALETTE
from snippets.core.charts import _finish, _title


def timeline_chart(
    spans: Sequence[dict[str, Any]],
    *,
    title: str,
    x_label: str,
    kinds: Sequence[str] | None = None,
    description: str = "",
) -> dict[str, Any]:
    """Spans {"lane", "kind", "label", "start", "end"} as rectangles from start to end
    on their lane's row. ``kinds`` fixes the legend's order and colours."""
    rows = [
        {k: s[k] for k in ("lane", "kind", "label")}
        | {"start": float(s["start"]), "end": float(s["end"])}
        for s in spans
    ]
    if not rows:
        raise ValueError("timeline_chart needs at least one span")
    if any(r["end"] < r["start"] for r in rows):
        raise ValueError("a span ends before it starts")
    kinds = list(kinds or dict.fromkeys(r["kind"] for r in rows))
    unknown = {r["kind"] for r in rows} - set(kinds)
    if unknown:
        raise ValueError(f"kinds {sorted(unknown)} are not in {kinds}")
    lanes = list(dict.fromkeys(r["lane"] for r in rows))
    domain = [min(r["start"] for r in rows), max(r["end"] for r in rows)]
    pick = alt.selection_point(fields=["kind"], bind="legend", name="pick")
    chart = (
        alt.Chart(alt.Data(values=rows))
        .mark_bar(stroke="#ffffff", strokeWidth=0.5)  # neighbours stay apart
        .encode(
            x=alt.X(
                "start:Q",
                title=x_label,
                scale=alt.Scale(domain=domain, zero=False, nice=False),
                axis=alt.Axis(labelOverlap=True, tickCount=6, format="~g"),
            ),
            x2="end:Q",
            y=alt.Y("lane:N", title=None, sort=lanes),
            color=alt.Color(
                "kind:N",
                scale=alt.Scale(
                    domain=kinds,
                    range=[PALETTE[i % len(PALETTE)] for i in range(len(kinds))],
                ),
                legend=alt.Legend(title=None, orient="bottom"),
            ),
            opacity=alt.condition(pick, alt.value(1.0), alt.value(0.2)),
            tooltip=[
                alt.Tooltip("lane:N", title="lane"),
                alt.Tooltip("label:N", title="span"),
                alt.Tooltip("start:Q", title="start", format=",.4~g"),
                alt.Tooltip("end:Q", title="end", format=",.4~g"),
            ],
        )
        .add_params(pick)
        .properties(
            title=_title(title),
            width="container",
            height=40 + 28 * len(lanes),
            description=description,
        )
    )
    return _finish(
        chart,
        {
            "lane": "lane",
            "label": "span",
            "kind": "kind",
            "start": "start",
            "end": "end",
        },
    )
