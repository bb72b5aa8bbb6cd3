"""Charts as Vega-Lite specs, written through Altair: the one place a figure is made.

A snippet's ``main()`` returns these dicts under ``"figures"``; ``results`` stores each
one as JSON and the page draws it with the vendored vega-embed (values on hover, a
legend that fades a series when clicked). The spec carries the light scheme; the
page's script swaps in dark text and grid colours when the reader's scheme is dark.
The colours, fonts and sizes live in ``snippets.core.chart_style``. Every chart ends
in ``_finish``: the house config, the schema check, and ``usermeta`` (the columns of
the text alternative a page lists below the chart, the dark scheme).

* :func:`line_chart`: measured series, and dashed models of them;
* :func:`heatmap`: a square matrix of values (bandwidth between ranks);
* :func:`timeline_chart`: a Gantt chart, one row per lane (a rank, a stream), one
  rectangle per span of work coloured by its kind; lanes keep the order they first
  appear in, hovering a span shows its label and times;
* charts a reader plays with, inputs bound to parameters that filter or recompute the
  data in the page, with no script of our own: :func:`picked_timeline` (timelines
  recorded at several settings, one radio group per setting), :func:`formula_explorer`
  (curves y = f(x) as Vega expressions over sliders, the lowest drawn as a band along
  the top) and :func:`link_graph` (a graph with fixed node positions, links coloured
  by kind, a ring drawn over them).

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
from dataclasses import dataclass
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

IDLE = "#808080"  # the bubble, and anything else not a series: the palette's grey


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


def _readable(spec: dict[str, Any]) -> dict[str, Any]:
    """Text marks in the axis colours of each scheme (the page swaps in ``dark``)."""
    spec["config"] = spec["config"] | {"text": {"color": "#222222"}}
    spec["usermeta"]["dark"] = spec["usermeta"]["dark"] | {"text": {"color": "#e8e8ec"}}
    return spec


def _colours(kinds: Sequence[str], grey: str | None = None) -> alt.Scale:
    """The palette in order; ``grey`` (a kind) gets the palette's grey."""
    colours = [k for k in kinds if k != grey]
    rng = {k: PALETTE[i % (len(PALETTE) - 1)] for i, k in enumerate(colours)}
    return alt.Scale(domain=list(kinds), range=[rng.get(k, IDLE) for k in kinds])


def picked_timeline(
    spans: Sequence[dict[str, Any]],
    *,
    settings: dict[str, Sequence[Any]],
    title: str,
    x_label: str,
    kinds: Sequence[str],
    idle: str | None = None,
    captions: Sequence[dict[str, Any]] = (),
    description: str = "",
) -> dict[str, Any]:
    """Spans {"lane", "kind", "label", "start", "end", <setting>: value, ...}; each
    setting (a field every span has) gets a radio group over its values, the first one
    picked. A span whose value for a setting is None is drawn whatever is picked (a
    setting that does not apply to it). ``captions``: rows of settings and "text",
    written above the lanes when they match. Kind ``idle`` is drawn grey and faint."""
    if not spans:
        raise ValueError("picked_timeline needs at least one span")
    missing = [k for k in ("lane", "kind", "start", "end", *settings)
               if k not in spans[0]]  # fmt: skip
    if missing or any(not values for values in settings.values()):
        raise ValueError(f"spans lack fields {missing}, or a setting has no values")
    unknown = {s["kind"] for s in spans} - set(kinds)
    if unknown:
        raise ValueError(f"kinds {sorted(unknown)} are not in {list(kinds)}")
    params = [alt.param(name=k, value=vs[0], bind=alt.binding_radio(
        options=list(vs), name=f"{k} ")) for k, vs in settings.items()]  # fmt: skip
    picked = " && ".join(
        f"(datum[{name!r}] === null || datum[{name!r}] === {name})" for name in settings
    )
    lanes = list(dict.fromkeys(s["lane"] for s in spans))
    enc = dict(
        x=alt.X("start:Q", title=x_label, scale=alt.Scale(zero=True, nice=False),
                axis=alt.Axis(labelOverlap=True, tickCount=6, format="~g")),
        x2="end:Q", y=alt.Y("lane:N", title=None, sort=lanes),
        color=alt.Color("kind:N", scale=_colours(kinds, idle),
                        legend=alt.Legend(title=None, orient="bottom")),
        opacity=alt.condition(f"datum.kind === {idle!r}", alt.value(0.35),
                              alt.value(1.0)),
        tooltip=[alt.Tooltip("lane:N"), alt.Tooltip("label:N", title="span"),
                 alt.Tooltip("start:Q", format=",.4~g"),
                 alt.Tooltip("end:Q", format=",.4~g")],
    )  # fmt: skip
    bars = alt.Chart().transform_filter(picked).mark_bar(
        stroke="#ffffff", strokeWidth=0.5).encode(**enc)  # fmt: skip
    layers = [bars]
    if captions:
        layers.append(
            alt.Chart(alt.Data(values=[dict(c) for c in captions]))
            .transform_filter(picked)
            .mark_text(align="left", baseline="bottom", fontSize=12, dy=-4)
            .encode(text="text:N", x=alt.value(0), y=alt.value(0))
        )
    chart = alt.layer(*layers, data=alt.Data(values=[dict(s) for s in spans]))
    chart = chart.add_params(*params).properties(
        title=alt.TitleParams(_title(title), offset=22),  # room for the caption
        width="container", height=50 + 28 * len(lanes), description=description,
    )  # fmt: skip
    columns = {k: k for k in settings} | {"lane": "lane", "label": "span",
                                          "start": "start", "end": "end"}  # fmt: skip
    return _readable(_finish(chart, columns))


@dataclass(frozen=True)
class Slider:
    """A number the reader sets: ``name`` is the Vega signal the expressions read."""

    name: str
    label: str
    value: float
    min: float
    max: float
    step: float


def formula_explorer(
    points: Sequence[dict[str, Any]],
    curves: dict[str, str],
    sliders: Sequence[Slider],
    *,
    title: str,
    x_label: str,
    y_label: str,
    derived: dict[str, str] | None = None,
    reference: str | None = None,
    description: str = "",
) -> dict[str, Any]:
    """Curves ``name -> Vega expression`` in ``datum.x`` and the sliders' names (and
    the ``derived`` signals, name -> expression of the sliders), drawn
    at the points' x on log axes and recomputed in the page whenever a slider moves.
    Along the top, a band coloured by the lowest curve at each x. ``reference`` names
    a field of the points drawn dashed grey (say, the best curve at fitted values);
    every field of the points is listed in the numbers below the chart."""
    rows = sorted((dict(r) for r in points), key=lambda r: r["x"])
    xs = [float(r["x"]) for r in rows]
    if len(xs) < 2 or xs[0] <= 0:
        raise ValueError("formula_explorer needs two or more positive x values")
    # each x owns the band between the geometric midpoints to its neighbours
    edges = [xs[0]] + [(a * b) ** 0.5 for a, b in zip(xs, xs[1:])] + [xs[-1]]
    for r, lo, hi in zip(rows, edges, edges[1:]):
        r.update(lo=lo, hi=hi)
    names = list(curves)
    x_enc = alt.X("x:Q", title=x_label, scale=alt.Scale(
        type="log", domain=[xs[0], xs[-1]], nice=False), axis=alt.Axis(
        format="~s", tickCount=6, labelOverlap=True))  # fmt: skip
    y_enc = alt.Y("y:Q", title=y_label, scale=alt.Scale(type="log"),
                  axis=alt.Axis(format="~s", tickCount=5))  # fmt: skip
    pick = alt.selection_point(fields=["curve"], bind="legend", name="pick")
    params = [alt.param(name=s.name, value=s.value, bind=alt.binding_range(
        min=s.min, max=s.max, step=s.step, name=s.label)) for s in sliders]  # fmt: skip
    params += [alt.param(name=k, expr=v) for k, v in (derived or {}).items()]
    base = (
        alt.Chart()
        .transform_calculate(**curves)
        .transform_fold(names, as_=["curve", "y"])
        .transform_joinaggregate(best="min(y)", groupby=["x"])
    )
    tip = [alt.Tooltip("curve:N"), alt.Tooltip("x:Q", title=x_label, format=",.4~s"),
           alt.Tooltip("y:Q", title=y_label, format=",.3~s")]  # fmt: skip
    colour = alt.Color("curve:N", scale=_colours(names), legend=alt.Legend(
        title=None, orient="bottom", columns=2))  # fmt: skip
    lines = base.mark_line(strokeWidth=2, clip=True).encode(
        x=x_enc, y=y_enc, color=colour, tooltip=tip,
        opacity=alt.condition(pick, alt.value(1.0), alt.value(0.15)),
    ).add_params(pick)  # fmt: skip
    band = (
        base.transform_filter("datum.y === datum.best")
        .mark_rect(height=12)
        .encode(x="lo:Q", x2="hi:Q", y=alt.value(6), color=colour, tooltip=tip)
    )
    layers = [lines, band]
    if reference:
        ref = alt.Chart().mark_line(
            strokeDash=[6, 4], strokeWidth=2, color=IDLE, clip=True
        )
        layers.insert(0, ref.encode(x=x_enc, y=alt.Y(f"{reference}:Q"), tooltip=[
            alt.Tooltip(f"{reference}:Q", format=",.3~s")]))  # fmt: skip
    chart = alt.layer(*layers, data=alt.Data(values=rows)).add_params(*params)
    chart = chart.properties(
        title=_title(title), width="container", height=300, description=description
    )
    columns = {k: k for k in rows[0] if k not in ("lo", "hi")} | {"x": x_label}
    return _finish(chart, columns)


def _tips(row: dict[str, Any]) -> list[alt.Tooltip]:
    """Every field but the coordinates, numbers as numbers."""
    return [
        alt.Tooltip(f"{k}:{'Q' if isinstance(v, (int, float)) else 'N'}", title=k)
        for k, v in row.items()
        if k not in ("x", "y", "x2", "y2", "mx", "my")
    ]


def link_graph(
    nodes: Sequence[dict[str, Any]],
    links: Sequence[dict[str, Any]],
    path: Sequence[str],
    *,
    title: str,
    kinds: Sequence[str],
    path_label: str = "ring",
    description: str = "",
) -> dict[str, Any]:
    """Nodes {"name", "x", "y", ...} at fixed places; links {"from", "to", "kind",
    ...}, straight, coloured by kind, hover shows every field; ``path`` (node names,
    closed back to the first) drawn wide and faint under the links."""
    if not nodes or not links:
        raise ValueError("link_graph needs nodes and links")
    at = {n["name"]: (float(n["x"]), float(n["y"])) for n in nodes}
    unknown = {x for link in links for x in (link["from"], link["to"])} | set(path)
    if unknown - set(at):
        raise ValueError(f"unknown nodes in links or path: {sorted(unknown - set(at))}")

    def segment(a: str, b: str) -> dict[str, float]:
        return {"x": at[a][0], "y": at[a][1], "x2": at[b][0], "y2": at[b][1]}

    edge_rows = [dict(link) | segment(link["from"], link["to"]) for link in links]
    for r in edge_rows:
        r.update(mx=(r["x"] + r["x2"]) / 2, my=(r["y"] + r["y2"]) / 2)
    hops = [segment(a, b) for a, b in zip(path, [*path[1:], *path[:1]])]
    xs = [x for x, _ in at.values()] + [y for _, y in at.values()]
    pad = 0.25 * (max(xs) - min(xs) or 1)
    dom = [min(xs) - pad, max(xs) + pad]
    x, y = (alt.X("x:Q", scale=alt.Scale(domain=dom), axis=None),
            alt.Y("y:Q", scale=alt.Scale(domain=dom), axis=None))  # fmt: skip
    ring = alt.Chart(alt.Data(values=hops)).mark_rule(
        strokeWidth=10, opacity=0.3, color=PALETTE[6], strokeCap="round"
    ).encode(x=x, y=y, x2="x2:Q", y2="y2:Q")  # fmt: skip
    colour = alt.Color("kind:N", scale=_colours(kinds), legend=alt.Legend(
        title=f"link kind (wide, pink: {path_label})", orient="bottom",
        columns={"expr": "containerSize()[0] < 520 ? 2 : 3"}))  # fmt: skip
    tip = _tips(edge_rows[0])
    edges = alt.Chart().mark_rule(strokeWidth=2.5).encode(
        x=x, y=y, x2="x2:Q", y2="y2:Q", color=colour, tooltip=tip)  # fmt: skip
    # a dot at each link's middle: a target for the hover, and a filled legend symbol
    middles = alt.Chart().mark_point(filled=True, size=70, opacity=1).encode(
        x=alt.X("mx:Q", axis=None), y=alt.Y("my:Q", axis=None), color=colour,
        tooltip=tip)  # fmt: skip
    dots = alt.Chart(alt.Data(values=[dict(n) for n in nodes])).mark_point(
        filled=True, size=260, color=IDLE, opacity=1
    ).encode(x=x, y=y, tooltip=_tips(nodes[0]))  # fmt: skip
    names = dots.mark_text(fontSize=11, dy=-16).encode(text="name:N")
    layers = (ring, edges, middles, dots, names)
    chart = alt.layer(*layers, data=alt.Data(values=edge_rows)).properties(
        title=_title(title), width="container", height=320, description=description
    )
    return _readable(_finish(chart, {k: k for k in links[0]}))
