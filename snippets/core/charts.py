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
- a model series is drawn dashed in the colour of the measured series it models, and
  only over the x its measurement covers: a fit is not drawn where there is no data;
- axes span exactly the data (no zero, no rounding out to nice numbers), with a few
  pixels of room so that the points at the ends show whole;
- numbers are written in their unit (``x_unit``, ``y_unit``: "B" for bytes in binary
  units, "s" or "ms" for times in s, ms, µs or ns), on the axes and in the tooltips
  alike; a log axis puts its ticks at powers of two (bytes) or 1-2-5 and decades;
- a legend lists only what is drawn;
- the width follows the page, text is at least 11 px, a title is one line when the
  plot is wide enough for it and wraps when it is not;
- a :class:`Note` writes one line at the point a chart is about (the knee, the
  crossover), a point the chart draws, so its place comes from the data.
"""

from __future__ import annotations

import itertools
import json
import math
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
    PAD,
    PALETTE,
    log_ticks,
    number_expr,
    wrapped_title,
)

IDLE = "#808080"  # the bubble, and anything else not a series: the palette's grey
TEXT_LIGHT, TEXT_DARK = LIGHT["title"]["color"], DARK["title"]["color"]


@dataclass(frozen=True)
class Note:
    """One line on the point a chart is about: ``text`` beside the point of series
    ``on`` (a line chart) at ``x``, or at ``x`` on lane ``on`` (a timeline: a span
    there starts or ends at ``x``). The chart refuses a point it does not draw."""

    text: str
    on: str
    x: float


def _title(text: str, **params: Any) -> dict[str, Any]:
    """A title that wraps only where the plot is narrower than its one line."""
    return {"text": wrapped_title(text), **params}


def _text_of(spec: dict[str, Any]) -> str:
    """The title as plain text: its widest choice of lines (the first), joined."""
    expr = spec["title"]["text"]["expr"]
    lines, _ = json.JSONDecoder().raw_decode(expr[expr.index("[") :])
    return " ".join(lines)


def validate(spec: dict[str, Any]) -> None:
    """Raise ``jsonschema.ValidationError`` unless ``spec`` is valid Vega-Lite."""
    validate_jsonschema(spec, load_schema(), rootschema=load_schema())


def _finish(chart: alt.TopLevelMixin, columns: dict[str, str]) -> dict[str, Any]:
    """The chart as a JSON-able dict in the house config, checked against the schema.

    ``usermeta`` carries what the page needs besides Vega-Lite: ``columns`` names the
    data fields for the text alternative, ``dark`` is merged over the config when the
    reader's scheme is dark."""
    spec = chart.to_dict(validate=False)
    spec["description"] = spec.get("description") or _text_of(spec)
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


def _scale(log: bool, domain: list[float], pad: int = 0) -> alt.Scale:
    """Exactly the data's extent: no rounding out, no zero (a log scale has none);
    ``pad`` pixels of room beyond each end."""
    extra = {"padding": pad} if pad else {}
    if log:
        return alt.Scale(type="log", domain=domain, nice=False, **extra)
    return alt.Scale(type="linear", domain=domain, zero=False, nice=False, **extra)


def _axis(
    unit: str | None, log: bool, domain: list[float] | None, most: int, x: bool = True
) -> alt.Axis:
    """Labels in the unit (64 KiB, 1.5 ms, 0.25, 12k), never "1e+1"; on a log axis
    ticks at evenly spaced powers of two (bytes), 1-2-5, 1-3 or decades, at most
    ``most`` of them (where the domain is known); elsewhere the axis picks them, one
    for every 100 px at most along an x axis."""
    ticks = log_ticks(*domain, unit, most) if log and domain else []
    count = {"expr": f"min({most}, ceil(width / 100))"} if x else most
    where = {"values": ticks} if ticks else {"tickCount": count}
    return alt.Axis(
        labelOverlap=True, labelExpr=number_expr("datum.value", unit), **where
    )


def _fraction(value: float, domain: list[float], log: bool) -> float:
    """Where ``value`` lies along an axis, 0 at the domain's start, 1 at its end."""
    f = math.log if log else float
    lo, hi = f(domain[0]), f(domain[1])
    return (f(value) - lo) / (hi - lo) if hi > lo else 0.5


def _note_text(note: Note, fx: float, fy: float | None = None) -> dict[str, Any]:
    """The note's text mark: on the side of the point with more room, cut short
    (…) where it would run past the plot's edge, on a phone say. ``fx``, ``fy``:
    where the point lies across and up the plot (0 to 1); no ``fy``: above it."""
    left = fx < 0.5
    below = fy is not None and fy > 0.75
    room = round(1 - fx if left else fx, 3)
    return dict(
        align="left" if left else "right",
        baseline="top" if below else "bottom",
        dx=8 if left else -8,
        dy=(8 if below else -8) if fy is not None else -4,
        fontSize=12,
        fontWeight="bold",
        limit={"expr": f"width * {room} - 12"},
    )


def line_chart(
    series: dict[str, Sequence[tuple[float, float]]],
    *,
    title: str,
    x_label: str,
    y_label: str,
    log_x: bool = False,
    log_y: bool = False,
    x_unit: str | None = None,
    y_unit: str | None = None,
    model_of: dict[str, str] | None = None,
    note: Note | None = None,
    description: str = "",
) -> dict[str, Any]:
    """Lines through (x, y) points, one per series name.

    ``model_of`` maps a model (predicted) series to the measured series it models: the
    model is dashed, in the measured series' colour, and drawn only over the x range
    of the measurement. ``x_unit``, ``y_unit``: see :func:`chart_style.number_expr`.
    Hovering a point shows its values; clicking a legend entry fades every other
    series. ``note``: one line at a point of one series."""
    model_of = dict(model_of or {})
    for model, measured in model_of.items():
        if model not in series or measured not in series:
            raise ValueError(f"model_of: {model!r} -> {measured!r} names no series")

    def finite(name: str) -> list[tuple[float, float]]:
        return [(float(x), float(y)) for x, y in series[name]
                if math.isfinite(x) and math.isfinite(y)]  # fmt: skip

    covered = {}  # a model's x range: its measurement's
    for model, measured in model_of.items():
        xs = [x for x, _ in finite(measured)] or [math.nan]
        covered[model] = (min(xs), max(xs))
    rows = [
        {"series": name, "x": x, "y": y, "model": name in model_of}
        for name in series
        for x, y in finite(name)
        if name not in covered or covered[name][0] <= x <= covered[name][1]
    ]
    if not rows:
        raise ValueError("line_chart needs at least one finite point")
    names = [n for n in series if any(r["series"] == n for r in rows)]  # drawn ones
    measured = [n for n in series if n not in model_of]
    colour_of = {n: PALETTE[i % len(PALETTE)] for i, n in enumerate(measured)}
    colour_of |= {m: colour_of[model_of[m]] for m in model_of}
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
    x = alt.X(
        "x:Q",
        title=x_label,
        scale=_scale(log_x, x_dom, PAD),
        axis=_axis(x_unit, log_x, x_dom, most=6),
    )
    y = alt.Y(
        "y:Q",
        title=y_label,
        scale=_scale(log_y, y_dom, PAD),
        axis=_axis(y_unit, log_y, y_dom, most=5, x=False),
    )
    base = (
        alt.Chart()
        .transform_calculate(
            x_text=number_expr("datum.x", x_unit), y_text=number_expr("datum.y", y_unit)
        )
        .encode(
            x=x,
            y=y,
            color=alt.Color(
                "series:N",
                scale=alt.Scale(domain=names, range=[colour_of[n] for n in names]),
                legend=legend,
            ),
            strokeDash=alt.StrokeDash(
                "series:N",
                scale=alt.Scale(
                    domain=names,
                    range=[
                        MODEL_DASH if n in model_of else MEASURED_DASH for n in names
                    ],
                ),  # fmt: skip
                legend=legend,
            ),
            opacity=alt.condition(pick, alt.value(1.0), alt.value(0.15)),
            tooltip=[
                alt.Tooltip("series:N", title="series"),
                alt.Tooltip("x_text:N", title=x_label),
                alt.Tooltip("y_text:N", title=y_label),
            ],
        )
    )
    lines = base.mark_line(strokeWidth=2, clip=True)
    # a point per value, for the tooltip; a model's points are small, since its curve is
    # usually sampled far more densely than the measurement
    points = base.mark_point(filled=True, clip=True).encode(
        strokeDash=alt.value(MEASURED_DASH),
        size=alt.condition("datum.model", alt.value(9), alt.value(36)),
    )
    layers = [lines, points]
    if note:
        spot = next(
            (r for r in rows
             if r["series"] == note.on and math.isclose(r["x"], note.x, rel_tol=1e-12)),
            None,
        )  # fmt: skip
        if spot is None:
            raise ValueError(f"note: series {note.on!r} has no point at x={note.x}")
        spot = spot | {"text": note.text}
        at = alt.Chart(alt.Data(values=[spot])).encode(x=x, y=y)
        layers += [
            at.mark_point(filled=True, size=130, opacity=1, color=colour_of[note.on])
            .encode(tooltip=[alt.Tooltip("text:N", title="note")]),
            at.mark_text(**_note_text(note, _fraction(spot["x"], x_dom, log_x),
                                      _fraction(spot["y"], y_dom, log_y)))
            .encode(text="text:N"),
        ]  # fmt: skip
    chart = (
        alt.layer(*layers, data=alt.Data(values=rows))  # the rows the page lists
        .add_params(pick)
        .properties(
            title=_title(title), width="container", height=280, description=description
        )
    )
    spec = _finish(chart, {"series": "series", "x": x_label, "y": y_label})
    return _readable(spec) if note else spec


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
            alt.Tooltip("value:Q", title=unit, format=",.4~r"),
        ],
    )
    cells = base.mark_rect().encode(
        color=alt.Color(
            "value:Q",
            title=unit,
            scale=alt.Scale(scheme="viridis", domain=[lo, hi], zero=False, nice=False),
            legend=alt.Legend(orient="bottom", gradientLength=200, format=",~r"),
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


def _kind_colours(
    kinds: Sequence[str], drawn: Sequence[str], grey: str | None = None
) -> alt.Scale:
    """The legend's kinds: those drawn, in the order of ``kinds``, each in the colour
    its place in ``kinds`` gives it (so F is blue in every chart); ``grey`` (a kind)
    gets the palette's grey."""
    colours = [k for k in kinds if k != grey]
    rng = {k: PALETTE[i % (len(PALETTE) - 1)] for i, k in enumerate(colours)}
    shown = [k for k in kinds if k in set(drawn)]
    return alt.Scale(domain=shown, range=[rng.get(k, IDLE) for k in shown])


def _time_tips(unit: str | None) -> dict[str, str]:
    return {
        "start_text": number_expr("datum.start", unit),
        "end_text": number_expr("datum.end", unit),
    }


def timeline_chart(
    spans: Sequence[dict[str, Any]],
    *,
    title: str,
    x_label: str,
    x_unit: str | None = None,
    kinds: Sequence[str] | None = None,
    note: Note | None = None,
    description: str = "",
) -> dict[str, Any]:
    """Spans {"lane", "kind", "label", "start", "end"} as rectangles from start to end
    on their lane's row. ``kinds`` fixes the kinds' order and colours; the legend
    lists those drawn. ``note``: one line above the plot at a moment of one lane,
    marked by a dashed rule down the lanes."""
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
    x = alt.X(
        "start:Q",
        title=x_label,
        scale=alt.Scale(domain=domain, zero=False, nice=False),
        axis=_axis(x_unit, False, None, most=6),
    )
    chart = (
        alt.Chart(alt.Data(values=rows))  # the rows the page lists
        .transform_calculate(**_time_tips(x_unit))
        .mark_bar(stroke="#ffffff", strokeWidth=0.5)  # neighbours stay apart
        .encode(
            x=x,
            x2="end:Q",
            y=alt.Y("lane:N", title=None, sort=lanes),
            color=alt.Color(
                "kind:N",
                scale=_kind_colours(kinds, [r["kind"] for r in rows]),
                legend=alt.Legend(title=None, orient="bottom"),
            ),
            opacity=alt.condition(pick, alt.value(1.0), alt.value(0.2)),
            tooltip=[
                alt.Tooltip("lane:N", title="lane"),
                alt.Tooltip("label:N", title="span"),
                alt.Tooltip("start_text:N", title="start"),
                alt.Tooltip("end_text:N", title="end"),
            ],
        )
        .add_params(pick)
    )
    if note:
        if not any(r["lane"] == note.on and note.x in (r["start"], r["end"])
                   for r in rows):  # fmt: skip
            raise ValueError(f"note: no span on {note.on!r} starts or ends at {note.x}")
        spot = alt.Chart(
            alt.Data(values=[{"start": float(note.x), "text": note.text}])
        ).encode(x=alt.X("start:Q"))
        rule = spot.mark_rule(strokeDash=[4, 3], strokeWidth=1.5)
        text = spot.mark_text(**_note_text(note, _fraction(note.x, domain, False)))
        chart = alt.layer(
            chart.properties(data=alt.Undefined),
            rule,
            text.encode(text="text:N", y=alt.value(0)),
            data=alt.Data(values=rows),
        )
    chart = chart.properties(
        title=_title(title, offset=22) if note else _title(title),  # room for the note
        width="container",
        height=40 + 28 * len(lanes),
        description=description,
    )
    spec = _finish(
        chart,
        {
            "lane": "lane",
            "label": "span",
            "kind": "kind",
            "start": "start",
            "end": "end",
        },
    )
    return _readable(spec) if note else spec


def _readable(spec: dict[str, Any]) -> dict[str, Any]:
    """Text and rule marks in the title's colour of each scheme (the page swaps in
    ``dark``)."""
    ink, dark_ink = {"color": TEXT_LIGHT}, {"color": TEXT_DARK}
    spec["config"] = spec["config"] | {"text": ink, "rule": ink}
    spec["usermeta"]["dark"] = spec["usermeta"]["dark"] | {
        "text": dark_ink,
        "rule": dark_ink,
    }
    return spec


def _colours(kinds: Sequence[str], grey: str | None = None) -> alt.Scale:
    """The palette in order; ``grey`` (a kind) gets the palette's grey."""
    return _kind_colours(kinds, kinds, grey)


def _picked_kinds(
    spans: Sequence[dict[str, Any]],
    settings: dict[str, Sequence[Any]],
    kinds: Sequence[str],
) -> str:
    """A Vega expression: the kinds the spans of the picked settings have, in the
    order of ``kinds``. A table over every combination of the settings, keyed by the
    picked values' places in their lists ("0,2,1")."""
    table = {}
    for places in itertools.product(*(range(len(vs)) for vs in settings.values())):
        chosen = {k: vs[i] for (k, vs), i in zip(settings.items(), places)}
        have = {
            s["kind"]
            for s in spans
            if all(s[k] is None or s[k] == v for k, v in chosen.items())
        }
        table[",".join(map(str, places))] = [k for k in kinds if k in have]
    key = " + ',' + ".join(
        f"indexof({json.dumps(list(vs))}, {k})" for k, vs in settings.items()
    )
    return f"{json.dumps(table, ensure_ascii=False)}[{key}]"


def picked_timeline(
    spans: Sequence[dict[str, Any]],
    *,
    settings: dict[str, Sequence[Any]],
    title: str,
    x_label: str,
    kinds: Sequence[str],
    x_unit: str | None = None,
    idle: str | None = None,
    captions: Sequence[dict[str, Any]] = (),
    description: str = "",
) -> dict[str, Any]:
    """Spans {"lane", "kind", "label", "start", "end", <setting>: value, ...}; each
    setting (a field every span has) gets a radio group over its values, the first one
    picked. A span whose value for a setting is None is drawn whatever is picked (a
    setting that does not apply to it). ``captions``: rows of settings and "text",
    written above the lanes when they match. Kind ``idle`` is drawn grey and faint.
    The legend lists the kinds the picked run draws."""
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
                axis=_axis(x_unit, False, None, most=6)),
        x2="end:Q", y=alt.Y("lane:N", title=None, sort=lanes),
        color=alt.Color("kind:N", scale=_kind_colours(kinds, [s["kind"] for s in spans],
                        idle), legend=alt.Legend(title=None, orient="bottom", values={
                            "expr": _picked_kinds(spans, settings, kinds)})),
        opacity=alt.condition(f"datum.kind === {idle!r}", alt.value(0.35),
                              alt.value(1.0)),
        tooltip=[alt.Tooltip("lane:N"), alt.Tooltip("label:N", title="span"),
                 alt.Tooltip("start_text:N", title="start"),
                 alt.Tooltip("end_text:N", title="end")],
    )  # fmt: skip
    bars = alt.Chart().transform_filter(picked).transform_calculate(
        **_time_tips(x_unit)).mark_bar(stroke="#ffffff", strokeWidth=0.5).encode(
        **enc)  # fmt: skip
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
        title=_title(title, offset=22),  # room for the caption
        width="container", height=50 + 28 * len(lanes), description=description,
    )  # fmt: skip
    spec = _readable(_finish(chart, {}))
    spec["usermeta"] |= _picked_table(spans, settings, kinds, x_unit, captions)
    return spec


def _picked_table(
    spans: Sequence[dict[str, Any]],
    settings: dict[str, Sequence[Any]],
    kinds: Sequence[str],
    x_unit: str | None,
    captions: Sequence[dict[str, Any]],
) -> dict[str, Any]:
    """The numbers of a picked timeline, a row a run (spans that share their
    settings): each kind's time summed over the lanes, the last end, and the caption.
    A row a span would be unreadable as a table; this one sums to what is drawn."""
    unit = f" ({x_unit})" if x_unit else ""
    rows: dict[tuple, dict[str, Any]] = {}
    for s in spans:
        key = tuple(s[k] for k in settings)
        row = rows.setdefault(key, dict(zip(settings, key)) | {"end": s["end"]})
        row[s["kind"]] = row.get(s["kind"], 0.0) + s["end"] - s["start"]
        row["end"] = max(row["end"], s["end"])
    for c in captions:
        key = tuple(c.get(k) for k in settings)
        rows.setdefault(key, dict(zip(settings, key)))["text"] = c["text"]
    present = [k for k in kinds if any(k in r for r in rows.values())]
    columns = ({k: k for k in settings} | {k: f"{k}, all lanes{unit}" for k in present}
               | {"end": f"last end{unit}", "text": "note"})  # fmt: skip
    rows_out = [{k: "–" if r.get(k) is None else r[k] for k in columns}
                for r in rows.values()]  # fmt: skip
    return {"columns": columns, "rows": rows_out}


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
    x_unit: str | None = None,
    y_unit: str | None = None,
    derived: dict[str, str] | None = None,
    reference: str | None = None,
    description: str = "",
) -> dict[str, Any]:
    """Curves ``name -> Vega expression`` in ``datum.x`` and the sliders' names (and
    the ``derived`` signals, name -> expression of the sliders), drawn
    at the points' x on log axes and recomputed in the page whenever a slider moves.
    Along the top, a band coloured by the lowest curve at each x. ``reference`` names
    a field of the points drawn dashed grey (say, the best curve at fitted values);
    every field of the points is listed in the numbers below the chart. ``x_unit``,
    ``y_unit``: as for :func:`line_chart`."""
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
        type="log", domain=[xs[0], xs[-1]], nice=False),
        axis=_axis(x_unit, True, [xs[0], xs[-1]], most=6))  # fmt: skip
    # the curves move with the sliders: the y axis picks its own ticks
    y_enc = alt.Y("y:Q", title=y_label, scale=alt.Scale(type="log"),
                  axis=_axis(y_unit, True, None, most=5, x=False))  # fmt: skip
    pick = alt.selection_point(fields=["curve"], bind="legend", name="pick")
    params = [alt.param(name=s.name, value=s.value, bind=alt.binding_range(
        min=s.min, max=s.max, step=s.step, name=s.label)) for s in sliders]  # fmt: skip
    params += [alt.param(name=k, expr=v) for k, v in (derived or {}).items()]
    base = (
        alt.Chart()
        .transform_calculate(**curves)
        .transform_fold(names, as_=["curve", "y"])
        .transform_joinaggregate(best="min(y)", groupby=["x"])
        .transform_calculate(x_text=number_expr("datum.x", x_unit),
                             y_text=number_expr("datum.y", y_unit))
    )  # fmt: skip
    tip = [alt.Tooltip("curve:N"), alt.Tooltip("x_text:N", title=x_label),
           alt.Tooltip("y_text:N", title=y_label)]  # fmt: skip
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
        ref = ref.transform_calculate(
            ref_text=number_expr(f"datum[{reference!r}]", y_unit)
        )
        layers.insert(0, ref.encode(x=x_enc, y=alt.Y(f"{reference}:Q"), tooltip=[
            alt.Tooltip("ref_text:N", title=reference)]))  # fmt: skip
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
