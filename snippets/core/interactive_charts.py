"""Charts a reader can play with, as Vega-Lite specs: inputs bound to parameters that
filter or recompute the data in the page, with no script of our own.

* :func:`picked_timeline`: timelines recorded at several settings, one radio group per
  setting; the spans of the picked run are drawn, the others filtered out.
* :func:`formula_explorer`: curves y = f(x) written as Vega expressions over sliders;
  the lowest curve at each x is drawn as a band along the top (the winner).
* :func:`link_graph`: a graph with fixed node positions, links coloured by kind, a
  path (a ring) drawn over them, and values on hover.

They follow ``snippets.core.charts`` (the same config, schema check and usermeta), so
the page draws them, swaps in the dark scheme and lists the numbers below each one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import altair as alt

from snippets.core.chart_style import PALETTE
from snippets.core.charts import _finish, _title

IDLE = "#808080"  # the bubble, and anything else not a series: the palette's grey


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
