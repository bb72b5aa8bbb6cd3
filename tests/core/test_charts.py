"""The chart specs: valid Vega-Lite, a model in its measurement's colour and dashed and
drawn only over its data, a heatmap whose legend names the unit, axes that span only
the data with room for the end points, labels and tooltips in their unit, a legend of
what is drawn, a note at a point the chart draws, and a palette that stays at 3:1 or
more against both page backgrounds (WCAG 2's contrast formula). The timeline keeps
lanes in the order given and kinds in the house palette. The interactive charts have
one input per setting or slider, their filter keeps exactly the picked run's spans
(evaluated here on the spec's own data), the winner band is the lowest curve. Bad
input is refused."""

from __future__ import annotations

import json
import re

import jsonschema
import pytest
from test_chart_style import label, title_at

from snippets.core import chart_style, charts
from snippets.core.chart_style import LIGHT, PAD, PALETTE
from snippets.core.charts import (
    Note,
    Slider,
    formula_explorer,
    link_graph,
    picked_timeline,
    timeline_chart,
    validate,
)

SERIES = {
    "ring": [(8, 2e-5), (1024, 3e-5), (1 << 20, 1.5e-3)],
    "ring (model)": [(8, 1.8e-5), (1 << 20, 1.4e-3), (1 << 22, 5e-3)],
    "tree": [(8, 1.2e-5), (1 << 20, 2.5e-3)],
}


def line() -> dict:
    return charts.line_chart(
        SERIES,
        title="all-reduce time on 4 ranks",
        x_label="bytes",
        y_label="seconds",
        log_x=True,
        log_y=True,
        x_unit="B",
        y_unit="s",
        model_of={"ring (model)": "ring"},
        description="Ring and tree all-reduce time against buffer size.",
    )


def heat() -> dict:
    return charts.heatmap(
        [[None, 9.5, 2.0], [9.0, None, 2.5], [1.9, 2.4, None]],
        ["0", "1", "2"],
        title="gloo, sender (row) to receiver (column)",
        unit="GB/s",
        description="Bandwidth between every pair of ranks.",
    )


def relative_luminance(hex_colour: str) -> float:
    """WCAG 2 relative luminance of an sRGB colour, written out from the definition."""
    channels = [int(hex_colour.lstrip("#")[i : i + 2], 16) / 255 for i in (0, 2, 4)]
    r, g, b = (
        c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in channels
    )
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast(a: str, b: str) -> float:
    hi, lo = sorted((relative_luminance(a), relative_luminance(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def encodings(spec: dict) -> list[dict]:
    return [layer["encoding"] for layer in spec["layer"]]


def test_the_contrast_formula_matches_known_pairs() -> None:
    assert contrast("#000000", "#ffffff") == pytest.approx(21.0)
    assert contrast("#777777", "#ffffff") == pytest.approx(4.48, abs=0.01)


@pytest.mark.parametrize(
    "background", [chart_style.LIGHT_BACKGROUND, chart_style.DARK_BACKGROUND]
)
def test_every_series_colour_has_3_to_1_contrast(background: str) -> None:
    ratios = {c: contrast(c, background) for c in chart_style.PALETTE}
    assert min(ratios.values()) >= 3.0, ratios


def test_the_dark_background_is_materials_slate() -> None:
    # Material's slate: hsla(var(--md-hue) = 225deg, 15%, 14%, 1)
    import colorsys

    rgb = colorsys.hls_to_rgb(225 / 360, 0.14, 0.15)
    assert chart_style.DARK_BACKGROUND == "#%02x%02x%02x" % tuple(
        round(c * 255) for c in rgb
    )


@pytest.mark.parametrize("make", [line, heat])
def test_specs_are_valid_vega_lite_and_json(make) -> None:
    spec = make()
    charts.validate(json.loads(json.dumps(spec)))
    assert spec["$schema"].startswith("https://vega.github.io/schema/vega-lite/v6")
    assert spec["description"]
    assert spec["width"] == "container"


def test_validate_rejects_a_broken_spec() -> None:
    spec = line()
    spec["layer"][0]["mark"]["type"] = "squiggle"
    with pytest.raises(jsonschema.ValidationError):
        charts.validate(spec)


def test_a_model_shares_its_measurements_colour_and_is_dashed() -> None:
    enc = encodings(line())[0]
    colour = dict(zip(enc["color"]["scale"]["domain"], enc["color"]["scale"]["range"]))
    dash = dict(
        zip(enc["strokeDash"]["scale"]["domain"], enc["strokeDash"]["scale"]["range"])
    )
    assert colour["ring (model)"] == colour["ring"] != colour["tree"]
    assert dash["ring (model)"] == chart_style.MODEL_DASH
    assert dash["ring"] == dash["tree"] == chart_style.MEASURED_DASH
    assert len(set(map(tuple, dash.values()))) == 2


def test_a_model_of_nothing_is_an_error() -> None:
    with pytest.raises(ValueError, match="names no series"):
        charts.line_chart(
            SERIES, title="t", x_label="x", y_label="y", model_of={"fit": "ring"}
        )


def test_values_show_on_hover_and_the_legend_toggles_series() -> None:
    spec = line()
    (param,) = spec["params"]
    assert param["select"]["type"] == "point"
    assert param["select"]["fields"] == ["series"]
    assert param["bind"] == "legend"
    for enc in encodings(spec):
        assert enc["opacity"]["condition"]["param"] == param["name"]
        assert enc["opacity"]["value"] < 0.5
        assert [t["field"] for t in enc["tooltip"]] == ["series", "x_text", "y_text"]


def test_axes_and_tooltips_write_numbers_in_their_unit() -> None:
    """The byte axis in binary units at powers of two, the time axis in µs and ms at
    1-3 steps, and the tooltips in the same words."""
    spec = line()
    enc = encodings(spec)[0]
    xs, ys = enc["x"]["axis"], enc["y"]["axis"]
    assert [label(xs["labelExpr"], v) for v in xs["values"]] == [
        "8 B", "64 B", "512 B", "4 KiB", "32 KiB", "256 KiB"]  # fmt: skip
    assert [label(ys["labelExpr"], v) for v in ys["values"]] == [
        "30 µs", "100 µs", "300 µs", "1 ms"]  # fmt: skip
    tips = {t["as"]: t["calculate"] for t in spec["layer"][0]["transform"]}
    at = tips["x_text"].replace("datum.x", "datum.value")
    assert label(at, 65536) == "64 KiB"
    assert label(tips["y_text"].replace("datum.y", "datum.value"), 1.5e-3) == "1.5 ms"


def test_axes_span_only_the_data_with_room_for_the_end_points() -> None:
    enc = encodings(line())[0]
    drawn = [
        (x, y)
        for name, pts in SERIES.items()
        for x, y in pts
        if name != "ring (model)" or x <= 1 << 20
    ]  # the model's last is cut
    xs, ys = [x for x, _ in drawn], [y for _, y in drawn]  # fmt: skip
    for channel, values in (("x", xs), ("y", ys)):
        scale = enc[channel]["scale"]
        assert scale["domain"] == [min(values), max(values)]
        assert scale["nice"] is False and scale["type"] == "log"
        assert scale["padding"] == PAD >= 6  # a point's radius is 3.4 px


def test_a_fit_is_drawn_only_over_the_data_it_models() -> None:
    series = {
        "measured": [(8, 1.0), (64, 2.0), (512, 5.0)],
        "fit": [(1, 0.9), (8, 1.1), (100, 3.0), (512, 5.1), (4096, 40.0)],
    }
    spec = charts.line_chart(series, title="t", x_label="x", y_label="y",
                             model_of={"fit": "measured"})  # fmt: skip
    fit = [(r["x"], r["y"]) for r in spec["data"]["values"] if r["series"] == "fit"]
    assert fit == [(8, 1.1), (100, 3.0), (512, 5.1)]
    assert encodings(spec)[0]["x"]["scale"]["domain"] == [8, 512]


def test_the_legend_lists_only_the_series_drawn() -> None:
    spec = charts.line_chart(
        {"a": [(1, 1.0), (2, 2.0)], "gone": [(1, float("nan"))], "b": [(1, 3.0)]},
        title="t", x_label="x", y_label="y",
    )  # fmt: skip
    for channel in ("color", "strokeDash"):
        assert encodings(spec)[0][channel]["scale"]["domain"] == ["a", "b"]
    colours = encodings(spec)[0]["color"]["scale"]["range"]
    assert colours == [PALETTE[0], PALETTE[2]]  # b keeps its colour


def note_rows(spec: dict) -> list[dict]:
    """The rows of the layers that draw a note (those with a "text" field)."""
    return [r for layer in spec["layer"] for r in layer.get("data", {}).get("values",
            []) if "text" in r]  # fmt: skip


def test_a_note_sits_on_a_point_the_chart_draws() -> None:
    note = Note("ring overtakes here", "ring", 1024)
    spec = charts.line_chart(SERIES, title="t", x_label="x", y_label="y", log_x=True,
                             log_y=True, note=note)  # fmt: skip
    validate(spec)
    drawn = {(r["series"], r["x"], r["y"]) for r in spec["data"]["values"]}
    rows = note_rows(spec)
    assert rows and all((r["series"], r["x"], r["y"]) in drawn for r in rows)
    assert {(r["x"], r["y"], r["text"]) for r in rows} == {
        (1024, 3e-5, "ring overtakes here")}  # fmt: skip
    text = next(layer["mark"] for layer in spec["layer"]
                if layer["mark"]["type"] == "text")  # fmt: skip
    assert text["align"] == "left"  # 1024 lies left of the middle: room on the right
    assert "text" in spec["config"] and "text" in spec["usermeta"]["dark"]
    with pytest.raises(ValueError, match="no point at x=2048"):
        charts.line_chart(SERIES, title="t", x_label="x", y_label="y",
                          note=Note("n", "ring", 2048))  # fmt: skip
    with pytest.raises(ValueError, match="no point"):
        charts.line_chart(
            SERIES, title="t", x_label="x", y_label="y", note=Note("n", "tree", 1024)
        )  # a point of another series


def test_a_linear_axis_does_not_reach_for_zero() -> None:
    spec = charts.line_chart(
        {"a": [(10, 100), (20, 140)]}, title="t", x_label="x", y_label="y"
    )
    scale = spec["layer"][0]["encoding"]["y"]["scale"]
    assert scale["domain"] == [100, 140]
    assert scale["type"] == "linear" and scale["zero"] is False


def test_a_log_axis_refuses_nonpositive_values() -> None:
    with pytest.raises(ValueError, match="log y axis"):
        charts.line_chart(
            {"a": [(1, 0.0), (2, 1.0)]}, title="t", x_label="x", y_label="y", log_y=True
        )


def test_the_heatmap_has_a_colour_legend_titled_with_its_unit() -> None:
    spec = heat()
    cells = next(e for e in encodings(spec) if "color" in e and "field" in e["color"])
    assert cells["color"]["title"] == "GB/s"
    assert cells["color"]["type"] == "quantitative"
    assert cells["color"]["scale"]["domain"] == [1.9, 9.5]
    assert "legend" in cells["color"] and cells["color"]["legend"] is not None
    assert title_at(spec["title"]["text"]["expr"], 688) == [
        "gloo, sender (row) to receiver (column) (GB/s)"]  # fmt: skip
    values = spec["data"]["values"]
    assert len(values) == 6  # the three empty diagonal cells are left out
    assert {"row": "0", "col": "1", "value": 9.5} in values


def test_long_titles_wrap_on_a_phone_and_not_on_the_page() -> None:
    text = "a title much longer than any phone could show on one line of text"
    spec = charts.heatmap([[1.0, 2.0], [3.0, 4.0]], ["a", "b"], title=text, unit="µs")
    validate(spec)
    expr = spec["title"]["text"]["expr"]
    assert title_at(expr, 688) == [f"{text} (µs)"]
    phone = title_at(expr, 300)
    assert len(phone) > 1
    assert all(len(line) <= chart_style.TITLE_WIDTH for line in phone)
    assert spec["description"] == f"{text} (µs)"  # no description given: the title


def test_text_is_at_least_11_px() -> None:
    config = line()["config"]
    sizes = [config["title"]["fontSize"]] + [
        config[part][key]
        for part in ("axis", "legend")
        for key in ("labelFontSize", "titleFontSize")
    ]
    assert min(sizes) >= 11
    assert all(layer["mark"].get("fontSize", 11) >= 11 for layer in heat()["layer"])


def test_the_dark_scheme_overrides_only_colours() -> None:
    dark = line()["usermeta"]["dark"]
    for part in dark.values():
        assert all(key.endswith("Color") or key == "color" for key in part)
        for colour in part.values():
            assert colour.startswith("#")


def _encodings(node, channel: str) -> list[dict]:
    """Every encoding of ``channel`` anywhere in a (layered) spec."""
    if isinstance(node, dict):
        here = (
            [node["encoding"][channel]] if channel in node.get("encoding", {}) else []
        )
        return here + [e for v in node.values() for e in _encodings(v, channel)]
    if isinstance(node, list):
        return [e for v in node for e in _encodings(v, channel)]
    return []


def test_no_axis_or_legend_is_left_to_vegas_default_format() -> None:
    """Vega's own "~g" writes 10 as "1e+1": every axis has a label expression, every
    legend of numbers a format without exponents."""
    for spec in (line(), heat(), timeline_chart(GANTT_SPANS, title="t", x_label="ms")):
        for channel in ("x", "y"):
            for enc in _encodings(spec, channel):
                axis = enc.get("axis") or {}
                assert not axis or "labelExpr" in axis or enc["type"] != "quantitative"
    legend = next(e for e in _encodings(heat(), "color") if "legend" in e)["legend"]
    assert legend["format"] == ",~r"


# --- timeline_chart ---

GANTT_SPANS = [
    {"lane": "rank 1", "kind": "F", "label": "F0", "start": 1, "end": 2},
    {"lane": "rank 0", "kind": "B", "label": "B0", "start": 3, "end": 5},
    {"lane": "rank 0", "kind": "F", "label": "F0", "start": 0, "end": 1},
]


def test_timeline_is_valid_with_lanes_kinds_and_extent() -> None:
    spec = timeline_chart(GANTT_SPANS, title="t", x_label="time (ms)", kinds="FBW")
    validate(spec)
    assert spec["config"] == LIGHT
    enc = spec["encoding"]
    assert enc["y"]["sort"] == ["rank 1", "rank 0"]  # first appearance
    # the legend: the kinds drawn (no W here), each in its colour among all the kinds
    assert enc["color"]["scale"] == {"domain": ["F", "B"], "range": PALETTE[:2]}
    assert enc["x"]["scale"]["domain"] == [0.0, 5.0]
    assert len(spec["data"]["values"]) == 3 and spec["height"] == 40 + 2 * 28
    with_w = [*GANTT_SPANS[:1], {**GANTT_SPANS[1], "kind": "W"}]
    spec = timeline_chart(with_w, title="t", x_label="ms", kinds="FBW")
    assert spec["encoding"]["color"]["scale"] == {
        "domain": ["F", "W"], "range": [PALETTE[0], PALETTE[2]]}  # fmt: skip


def test_a_timeline_note_marks_a_moment_where_a_span_of_its_lane_starts_or_ends():
    note = Note("rank 0 idle 2 ms", "rank 0", 3)  # B0 starts at 3 on rank 0
    spec = timeline_chart(GANTT_SPANS, title="t", x_label="time", x_unit="ms",
                          note=note)  # fmt: skip
    validate(spec)
    assert spec["data"]["values"] == timeline_chart(
        GANTT_SPANS, title="t", x_label="time")["data"]["values"]  # fmt: skip
    (row,) = {json.dumps(r, sort_keys=True) for r in note_rows(spec)}
    row = json.loads(row)
    starts_or_ends = {(s["lane"], t) for s in GANTT_SPANS for t in (s["start"],
                      s["end"])}  # fmt: skip
    assert ("rank 0", row["start"]) in starts_or_ends and row["start"] == 3
    marks = [layer["mark"]["type"] for layer in spec["layer"]]
    assert marks == ["bar", "rule", "text"]
    for lane, x in (("rank 0", 2), ("rank 1", 3)):  # no span there
        with pytest.raises(ValueError, match="starts or ends"):
            timeline_chart(GANTT_SPANS, title="t", x_label="x", note=Note("n", lane, x))


def test_time_axes_and_tooltips_of_a_timeline_are_in_ms_and_s() -> None:
    spec = timeline_chart(GANTT_SPANS, title="t", x_label="time", x_unit="ms")
    axis = spec["encoding"]["x"]["axis"]
    assert [label(axis["labelExpr"], v) for v in (0, 0.5, 250, 1500)] == [
        "0", "500 µs", "250 ms", "1.5 s"]  # fmt: skip
    tips = {t["as"]: t["calculate"] for t in spec["transform"]}
    assert label(tips["end_text"].replace("datum.end", "datum.value"), 5) == "5 ms"


@pytest.mark.parametrize(
    ("spans", "kinds", "message"),
    [
        ([], None, "at least one span"),
        ([{**GANTT_SPANS[0], "end": 0}], None, "ends before"),
        (GANTT_SPANS, "F", "not in"),
    ],
)
def test_timeline_refuses_bad_spans(spans, kinds, message) -> None:
    with pytest.raises(ValueError, match=message):
        timeline_chart(spans, title="t", x_label="x", kinds=kinds)


# --- the interactive charts ---

SPANS = [
    {"lane": "rank 0", "kind": "F", "label": "F0", "start": 0, "end": 1, "p": 2,
     "v": None},
    {"lane": "rank 1", "kind": "F", "label": "F0", "start": 1, "end": 2, "p": 2,
     "v": 2},
    {"lane": "rank 2", "kind": "idle", "label": "idle", "start": 0, "end": 2, "p": 3,
     "v": 1},
]  # fmt: skip


def shown(spec: dict, picked: dict) -> list[dict]:
    """The rows the layer's filter keeps: its expression read as Python."""
    expr = spec["layer"][0]["transform"][0]["filter"]
    py = re.sub(r"datum\['(\w+)'\]", r"row['\1']", expr)
    for js, python in (("===", "=="), ("&&", "and"), ("||", "or"), ("null", "None")):
        py = py.replace(js, python)
    return [r for r in spec["data"]["values"] if eval(py, {"row": r} | picked)]


def test_picked_timeline_filters_to_the_picked_settings() -> None:
    spec = picked_timeline(SPANS, settings={"p": [2, 3], "v": [1, 2]}, title="t",
                           x_label="ms", kinds=["F", "idle"], idle="idle",
                           captions=[{"p": 2, "v": None, "text": "hello"}])  # fmt: skip
    validate(spec)
    assert (
        spec["config"]["axis"] == LIGHT["axis"] and "text" in spec["usermeta"]["dark"]
    )
    radios = {q["name"]: q["bind"] for q in spec["params"]}
    assert radios["p"] == {"input": "radio", "options": [2, 3], "name": "p "}
    assert [r["label"] for r in shown(spec, {"p": 2, "v": 2})] == ["F0", "F0"]
    assert [r["lane"] for r in shown(spec, {"p": 2, "v": 1})] == ["rank 0"]
    assert [r["kind"] for r in shown(spec, {"p": 3, "v": 1})] == ["idle"]
    colours = spec["layer"][0]["encoding"]["color"]["scale"]
    assert colours == {"domain": ["F", "idle"], "range": [PALETTE[0], "#808080"]}
    # a kind no span has (W) is left out of the legend; B keeps its colour
    spans = [{**SPANS[0], "kind": "B"}, *SPANS[1:]]
    spec = picked_timeline(
        spans,
        settings={"p": [2, 3], "v": [1, 2]},
        title="t",
        x_label="ms",
        kinds=["F", "B", "W", "idle"],
        idle="idle",
    )
    colours = spec["layer"][0]["encoding"]["color"]["scale"]
    assert colours == {"domain": ["F", "B", "idle"],
                       "range": [PALETTE[0], PALETTE[1], "#808080"]}  # fmt: skip


def legend_at(spec: dict, picked: dict) -> list[str]:
    """The legend's entries for the picked settings: its ``values`` expression, a
    table keyed by the picks' places in their radio groups, read here."""
    expr = spec["layer"][0]["encoding"]["color"]["legend"]["values"]["expr"]
    table, end = json.JSONDecoder().raw_decode(expr)
    options = [json.loads(a) for a in re.findall(r"indexof\((\[.*?\]), \w+\)", expr)]
    names = re.findall(r"indexof\(\[.*?\], (\w+)\)", expr)
    return table[",".join(str(o.index(picked[n])) for o, n in zip(options, names))]


def test_the_picked_timelines_legend_lists_what_the_pick_draws() -> None:
    spans = [*SPANS, {**SPANS[1], "kind": "W", "label": "W0", "v": 1}]
    settings = {"p": [2, 3], "v": [1, 2]}
    spec = picked_timeline(spans, settings=settings, title="t", x_label="ms",
                           kinds=["F", "W", "idle"], idle="idle")  # fmt: skip
    for p in (2, 3):
        for v in (1, 2):
            drawn = {r["kind"] for r in shown(spec, {"p": p, "v": v})}
            want = [k for k in ("F", "W", "idle") if k in drawn]
            assert legend_at(spec, {"p": p, "v": v}) == want, (p, v)
    assert legend_at(spec, {"p": 2, "v": 1}) == ["F", "W"]  # rank 0's F, the W
    assert legend_at(spec, {"p": 3, "v": 2}) == []


def test_formula_explorer_has_sliders_and_a_band_of_the_lowest_curve() -> None:
    points = [{"x": 2.0**i, "fit": 1.0} for i in range(5)]
    spec = formula_explorer(points, {"flat": "a", "rising": "datum.x"},
                            [Slider("a", "a ", 3.0, 1.0, 9.0, 1.0)], title="t",
                            x_label="n", y_label="s", derived={"b": "2*a"},
                            reference="fit")  # fmt: skip
    validate(spec)
    params = {q["name"]: q for q in spec["params"]}
    assert params["a"]["bind"]["input"] == "range" and params["b"]["expr"] == "2*a"
    rows = spec["data"]["values"]
    assert [r["x"] for r in rows] == [1, 2, 4, 8, 16]
    # the bands tile the axis: each ends where the next begins, at geometric midpoints
    assert rows[0]["lo"] == 1 and rows[-1]["hi"] == 16
    assert all(a["hi"] == b["lo"] == pytest.approx((a["x"] * b["x"]) ** 0.5)
               for a, b in zip(rows, rows[1:]))  # fmt: skip
    band = spec["layer"][2]
    assert band["mark"]["type"] == "rect"
    assert {"filter": "datum.y === datum.best"} in band["transform"]
    assert spec["layer"][0]["encoding"]["y"]["field"] == "fit"


def test_link_graph_places_links_and_the_path_at_their_nodes() -> None:
    nodes = [{"name": n, "x": x, "y": y} for n, x, y in
             (("A", 0, 0), ("B", 1, 0), ("C", 0, 1))]  # fmt: skip
    links = [{"from": "A", "to": "B", "kind": "fast", "GB/s": 50.0},
             {"from": "B", "to": "C", "kind": "slow", "GB/s": 5.0}]  # fmt: skip
    spec = link_graph(nodes, links, ["A", "C", "B"], title="g", kinds=["fast", "slow"])
    validate(spec)
    edges = spec["data"]["values"]
    assert (edges[1]["x"], edges[1]["y"], edges[1]["x2"], edges[1]["y2"]) == (
        1,
        0,
        0,
        1,
    )
    hops = spec["layer"][0]["data"]["values"]  # the closed path A → C → B → A
    assert [(h["x"], h["y"]) for h in hops] == [(0, 0), (0, 1), (1, 0)]
    assert (hops[-1]["x2"], hops[-1]["y2"]) == (0, 0)
    tips = {t["field"] for t in spec["layer"][1]["encoding"]["tooltip"]}
    assert {"from", "to", "kind", "GB/s"} <= tips


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: picked_timeline([], settings={}, title="t", x_label="x", kinds=[]),
         "at least one span"),
        (lambda: picked_timeline(SPANS, settings={"q": [1]}, title="t", x_label="x",
                                 kinds=["F", "idle"]), "lack fields"),
        (lambda: picked_timeline(SPANS, settings={"p": [2]}, title="t", x_label="x",
                                 kinds=["F"]), "not in"),
        (lambda: formula_explorer([{"x": 1}], {}, [], title="t", x_label="x",
                                  y_label="y"), "two or more"),
        (lambda: link_graph([{"name": "A", "x": 0, "y": 0}], [{"from": "A",
         "to": "Z", "kind": "k"}], [], title="t", kinds=["k"]), "unknown nodes"),
    ],
)  # fmt: skip
def test_interactive_charts_refuse_bad_input(call, message) -> None:
    with pytest.raises(ValueError, match=message):
        call()
