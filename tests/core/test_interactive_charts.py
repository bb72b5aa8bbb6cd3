"""The interactive charts: valid Vega-Lite in the house config, one input per setting
or slider, the filter keeps exactly the picked run's spans (evaluated here on the
spec's own data), the winner band is the lowest curve, and bad input is refused."""

from __future__ import annotations

import re

import pytest

from snippets.core.chart_style import LIGHT, PALETTE
from snippets.core.charts import validate
from snippets.core.interactive_charts import (
    Slider,
    formula_explorer,
    link_graph,
    picked_timeline,
)

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
def test_bad_input_is_refused(call, message) -> None:
    with pytest.raises(ValueError, match=message):
        call()
