"""Parts are data: each builder returns ``{"kind", "data"}`` that JSON carries
unchanged (rank 0's value crosses processes and lands in ``results/<name>.json``),
with a kind the renderer has a row for; an ``Excerpt`` prints each line once and keeps
it as printed."""

from __future__ import annotations

import json

import pytest

from snippets.core import parts
from snippets.render.kinds import KINDS

TRACE = {"title": "ring", "frames": [{"t": 0, "ranks": [1, 2]}], "n": [1, 2.5]}
BUILT = {
    "player": parts.player(TRACE),
    "viewer": parts.viewer({"model": "M", "modules": []}, {"tp": 2}),
    "predict": parts.prediction("q1", "How many?", "bytes", 1536.0, "2·768", "x.py"),
    "sizing": parts.sizing({"presets": {"a": 1}, "help": "…"}),
}


@pytest.mark.parametrize("kind", sorted(BUILT))
def test_a_part_is_its_kind_and_data_and_survives_json(kind) -> None:
    part = BUILT[kind]
    assert set(part) == {"kind", "data"} and part["kind"] == kind
    assert json.loads(json.dumps(part)) == part
    assert kind in KINDS


def test_every_kind_has_a_builder_and_the_builders_keep_what_they_are_given() -> None:
    assert set(parts.Kind.__args__) == set(BUILT)
    assert BUILT["player"]["data"] is TRACE
    assert BUILT["viewer"]["data"]["start"] == {"tp": 2}
    assert parts.viewer({"model": "M"})["data"]["start"] is None
    q = BUILT["predict"]["data"]
    assert (q["id"], q["unit"], q["answer"], q["source"]) == (
        "q1",
        "bytes",
        1536.0,
        "x.py",
    )


def test_an_excerpt_prints_each_line_once_and_keeps_it(capsys) -> None:
    said = parts.Excerpt()
    said("first: 3 ms")
    said("second: 4 ms")
    assert capsys.readouterr().out == "first: 3 ms\nsecond: 4 ms\n"
    assert said.lines == ["first: 3 ms", "second: 4 ms"]
