"""``write`` puts one record into ``results/``: the JSON as it was given, and one
rendering per table, figure, markdown part, part and excerpt, each ending with the
run's provenance line."""

from __future__ import annotations

import json

from snippets.core import parts
from snippets.render import write
from snippets.render.kinds import KINDS

PROV = {
    "device": "cpu",
    "backend": "gloo",
    "world_size": 2,
    "torch": "2.13.0",
    "python": "3.11",
    "commit": "abc1234",
    "utc": "2026-12-07T12:00:00Z",
}
RECORD = {
    "command": "python -m snippets run demo",
    "output": "line one\nline two\n",
    "provenance": PROV,
    "result": {
        "tables": {"sizes": [{"n": 1, "ms": 0.5}, {"n": 2, "ms": 1.25}]},
        "figures": {"curve": {"mark": "line", "data": {"values": [{"x": 1, "y": 2}]}}},
        "markdown": {"why": "Because *two*."},
        "parts": {
            "ask": parts.prediction("q", "How many?", "bytes", 8.0, "4·2", "d.py")
        },
        "excerpts": {"summary": ["line two"]},
    },
}


def test_every_rendering_is_written_and_ends_with_the_provenance(tmp_path) -> None:
    written = write(tmp_path, "demo", RECORD)
    names = sorted(p.name for p in written)
    assert names == sorted(
        [
            "demo.json",
            "demo.md",
            "demo.sizes.md",
            "demo.curve.md",
            "demo.curve.vl.json",
            "demo.why.md",
            "demo.ask.md",
            "demo.summary.md",
        ]
    )
    marker = KINDS["provenance"].marker
    for path in written:
        if path.suffix == ".md":
            last = path.read_text().rstrip().splitlines()[-1]
            assert last.startswith(marker) and "commit abc1234" in last, path.name
    assert json.loads((tmp_path / "demo.json").read_text()) == RECORD
    assert (
        json.loads((tmp_path / "demo.curve.vl.json").read_text())
        == (RECORD["result"]["figures"]["curve"])
    )


def test_each_rendering_shows_what_it_was_given(tmp_path) -> None:
    write(tmp_path, "demo", RECORD)
    out = (tmp_path / "demo.md").read_text()
    assert out.startswith('```text title="$ python -m snippets run demo"\nline one')
    assert "| 1.25" in (tmp_path / "demo.sizes.md").read_text()
    assert (tmp_path / "demo.why.md").read_text().startswith("Because *two*.\n")
    assert (tmp_path / "demo.ask.md").read_text().startswith(KINDS["predict"].marker)
    summary = (tmp_path / "demo.summary.md").read_text()
    assert "line two" in summary and "line one" not in summary
    assert (tmp_path / "demo.curve.md").read_text().startswith(KINDS["chart"].marker)


def test_a_result_that_is_not_a_dict_writes_the_output_alone(tmp_path) -> None:
    record = RECORD | {"result": 3.5}
    assert sorted(p.name for p in write(tmp_path, "bare", record)) == [
        "bare.json",
        "bare.md",
    ]
