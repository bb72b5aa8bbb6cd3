"""The note's table of cuts: four TP places and one PP boundary a layer, and the
run's check against estimate() passes on the export and fails on a wrong graph."""

from __future__ import annotations

import copy

import pytest

from snippets.viewer.overlay_cuts import DEGREES, check, layer_rows
from snippets.viewer.parallel_overlay import Degrees


def test_one_layer_has_four_tp_places_and_a_boundary(tiny) -> None:
    _, _, graph = tiny
    rows = layer_rows(graph, DEGREES)
    assert [r["kind"] for r in rows].count("TP") == 4
    assert [r["kind"] for r in rows].count("PP") == 1
    sp = layer_rows(graph, Degrees(dp=2, tp=2, pp=2, zero=1, sp=True))
    assert all("all-gather" in r["collective"] for r in sp if r["kind"] == "TP")
    tp_bytes = sum(r["bytes sent"] for r in rows if r["kind"] == "TP")
    assert tp_bytes == sum(r["bytes sent"] for r in sp if r["kind"] == "TP")


def test_check_passes_and_fails_on_a_wrong_graph(tiny) -> None:
    _, args, graph = tiny
    seq = args[0].shape[1]
    assert check(graph, seq, DEGREES)["TP"] > 0
    bad = copy.deepcopy(graph)
    fc = next(m for m in bad["modules"] if m["id"] == "blocks.0.mlp.fc")
    fc["tp"] = ""  # forget that fc is column split: more bytes a rank than Megatron
    with pytest.raises(AssertionError):
        check(bad, seq, DEGREES)
