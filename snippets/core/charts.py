"""Charts as Vega-Lite specs, written through Altair: a line chart and a heatmap.

A snippet's ``main()`` returns these dicts under ``"figures"``; ``results`` stores each
one as JSON and the page draws it with the vendored vega-embed (values on hover, a
legend that fades a series when clicked). The spec carries the light scheme; the
page's script swaps in dark text and grid colours when the reader's scheme is dark.
The colours, fonts and sizes live in ``snippets.core.chart_style``.

Choices the notes rely on:

- every series colour has at least 3:1 contrast against the page in both schemes
  (WCAG 2 contrast against white and against Material's slate, #1e2129);
- a model series is drawn dashed in the colour of the measured series it models;
- axes span exactly the data (no zero, no rounding out to nice numbers);
- the width follows the page, text is at least 11 px, long titles wrap.
"""

from __future__ import annotations

import math
import textwrap
from typing import Any, Sequence

import altair as alt
from altair.utils.schemapi import validate_jsonschema
from altair.vegalite.v6.schema import load_schema

from snippets.core.chart_style import (
    DARK,
    LIGHT,
    MEASURED_DASH,
    MODEL_DASH,
    PALETTE,
    TITLE_WIDTH,
)


def _title(text: str) -> list[str]:
    return textwrap.wrap(text, TITLE_WIDTH) or [""]


def validate(spec: dict[str, Any]) -> None:
    """Raise ``jsonschema.ValidationError`` unless ``spec`` is valid Vega-Lite."""
    validate_jsonschema(spec, load_schema(), rootschema=load_schema())


def _finish(chart: alt.TopLevelMixin, columns: dict[str, str]) -> dict[str, Any]:
    """The chart as a JSON-able dict in the house config, checked against the schema.

    ``usermeta`` carries what the page needs besides Vega-Lite: ``columns`` names the
    data fields for the text alternative, ``dark`` is merged over the config when the
    reader's scheme is dark."""
    spec = chart.to_dict(validate=False)
    spec["config"] = LIGHT
    spec["autosize"] = {"type": "fit-x", "contains": "padding"}
    spec["usermeta"] = {"columns": columns, "dark": DARK}
    validate(spec)
    return spec


def _extent(values: list[float], log: bool, axis: str) -> list[float]:
    if log and min(values) <= 0:
        raise ValueError(f"a log {axis} axis needs positive values, got {min(values)}")
    lo, hi = min(values), max(values)
    if lo == hi:  # one value: give the scale some room around it
        lo, hi = (lo / 2, hi * 2) if log else (lo - 1, hi + 1)
    return [lo, hi]


def _scale(log: bool, domain: list[float]) -> alt.Scale:
    """Exactly the data's extent: no rounding out, no zero (a log scale has none)."""
    if log:
        return alt.Scale(type="log", domain=domain, nice=False)
    return alt.Scale(type="linear", domain=domain, zero=False, nice=False)


def _axis(label: str, log: bool, tick_count: int) -> alt.Axis:
    """SI prefixes on a log axis (1k, 1M); on a time axis with the unit written out
    (100µs, 10ms), so that an "m" is never read as minutes."""
    axis = {"labelOverlap": True, "tickCount": tick_count}
    if log and "second" in label:
        return alt.Axis(**axis, labelExpr="format(datum.value, '~s') + 's'")
    return alt.Axis(**axis, format="~s" if log else "~g")


def line_chart(
    series: dict[str, Sequence[tuple[float, float]]],
    *,
    title: str,
    x_label: str,
    y_label: str,
    log_x: bool = False,
    log_y: bool = False,
    model_of: dict[str, str] | None = None,
    description: str = "",
) -> dict[str, Any]:
    """Lines through (x, y) points, one per series name.

    ``model_of`` maps a model (predicted) series to the measured series it models: the
    model is dashed, in the measured series' colour. Hovering a point shows its values;
    clicking a legend entry fades every other series."""
    model_of = dict(model_of or {})
    names = list(series)
    for model, measured in model_of.items():
        if model not in series or measured not in series:
            raise ValueError(f"model_of: {model!r} -> {measured!r} names no series")
    measured = [n for n in names if n not in model_of]
    colour_of = {n: PALETTE[i % len(PALETTE)] for i, n in enumerate(measured)}
    colour_of |= {m: colour_of[model_of[m]] for m in model_of}
    rows = [
        {"series": name, "x": float(x), "y": float(y), "model": name in model_of}
        for name in names
        for x, y in series[name]
        if all(map(math.isfinite, (x, y)))
    ]
    if not rows:
        raise ValueError("line_chart needs at least one finite point")
    x_dom = _extent([r["x"] for r in rows], log_x, "x")
    y_dom = _extent([r["y"] for r in rows], log_y, "y")
    pick = alt.selection_point(fields=["series"], bind="legend", name="pick")
    legend = alt.Legend(
        title=None,
        orient="bottom",
        columns={"expr": "containerSize()[0] < 520 ? 1 : 2"},  # one column on a phone
        symbolType="stroke",
        symbolStrokeWidth=3,
        symbolSize=400,  # a stroke 20 px long: long enough to show the model's dashes
    )
    base = alt.Chart(alt.Data(values=rows)).encode(
        x=alt.X(
            "x:Q",
            title=x_label,
            scale=_scale(log_x, x_dom),
            axis=_axis(x_label, log_x, tick_count=6),
        ),
        y=alt.Y(
            "y:Q",
            title=y_label,
            scale=_scale(log_y, y_dom),
            axis=_axis(y_label, log_y, tick_count=5),
        ),
        color=alt.Color(
            "series:N",
            scale=alt.Scale(domain=names, range=[colour_of[n] for n in names]),
            legend=legend,
        ),
        strokeDash=alt.StrokeDash(
            "series:N",
            scale=alt.Scale(
                domain=names,
                range=[MODEL_DASH if n in model_of else MEASURED_DASH for n in names],
            ),
            legend=legend,
        ),
        opacity=alt.condition(pick, alt.value(1.0), alt.value(0.15)),
        tooltip=[
            alt.Tooltip("series:N", title="series"),
            alt.Tooltip("x:Q", title=x_label, format=",.4~g"),
            alt.Tooltip("y:Q", title=y_label, format=",.4~g"),
        ],
    )
    lines = base.mark_line(strokeWidth=2, clip=True)
    # a point per value, for the tooltip; a model's points are small, since its curve is
    # usually sampled far more densely than the measurement
    points = base.mark_point(filled=True, clip=True).encode(
        strokeDash=alt.value(MEASURED_DASH),
        size=alt.condition("datum.model", alt.value(9), alt.value(36)),
    )
    chart = (
        alt.layer(lines, points)
        .add_params(pick)
        .properties(
            title=_title(title), width="container", height=280, description=description
        )
    )
    return _finish(chart, {"series": "series", "x": x_label, "y": y_label})


def heatmap(
    matrix: Sequence[Sequence[float | None]],
    labels: Sequence[str],
    *,
    title: str,
    unit: str,
    row_title: str = "from",
    col_title: str = "to",
    description: str = "",
) -> dict[str, Any]:
    """A square matrix as coloured cells, each with its value written in it; ``None``
    leaves a cell empty. The colour legend's title is the unit."""
    labels = [str(label) for label in labels]
    if len(matrix) != len(labels) or any(len(row) != len(labels) for row in matrix):
        raise ValueError(f"heatmap needs a {len(labels)}x{len(labels)} matrix")
    rows = [
        {"row": labels[i], "col": labels[j], "value": float(v)}
        for i, line in enumerate(matrix)
        for j, v in enumerate(line)
        if v is not None and math.isfinite(v)
    ]
    if not rows:
        raise ValueError("heatmap needs at least one value")
    lo, hi = _extent([r["value"] for r in rows], False, "colour")
    order = alt.Sort(labels)
    base = alt.Chart(alt.Data(values=rows)).encode(
        x=alt.X(
            "col:O",
            title=col_title,
            sort=order,
            axis=alt.Axis(orient="top", labelAngle=0),
        ),
        y=alt.Y("row:O", title=row_title, sort=order),
        tooltip=[
            alt.Tooltip("row:O", title=row_title),
            alt.Tooltip("col:O", title=col_title),
            alt.Tooltip("value:Q", title=unit, format=",.4~g"),
        ],
    )
    cells = base.mark_rect().encode(
        color=alt.Color(
            "value:Q",
            title=unit,
            scale=alt.Scale(scheme="viridis", domain=[lo, hi], zero=False, nice=False),
            legend=alt.Legend(orient="bottom", gradientLength=200, format="~g"),
        )
    )
    # dark text on viridis's light half, light text on its dark half
    text = base.mark_text(fontSize=11).encode(
        text=alt.Text("value:Q", format=",.3~r"),  # 1,830 rather than 1.83e+3
        color=alt.condition(
            alt.datum.value > (lo + hi) / 2, alt.value("#111111"), alt.value("#ffffff")
        ),
    )
    chart = alt.layer(cells, text).properties(
        title=_title(f"{title} ({unit})"),
        width="container",
        height=min(420, 40 + 32 * len(labels)),
        description=description,
    )
    return _finish(chart, {"row": row_title, "col": col_title, "value": unit})
