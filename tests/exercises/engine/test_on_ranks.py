"""Merging what each rank wrote: a case fails on the rank that stopped first, not on
a peer that only saw its connection close, and what each rank waited on is kept."""

from __future__ import annotations

import json

from snippets.exercises.engine.on_ranks import merge

ECHO = "it raised RuntimeError: Connection closed by peer"


def write(folder, rank: int, cases: list[dict], wait: str | None = None) -> None:
    state = {"cases": cases, "wait": wait}
    (folder / f"rank{rank}.json").write_text(json.dumps(state))


def case(title: str, failure: str | None, stopped: bool = False) -> dict:
    return {"title": title, "failure": failure, "detail": [title], "stopped": stopped}


def test_the_first_cause_is_named_not_its_echo(tmp_path) -> None:
    write(tmp_path, 0, [case("ok", None), case("swap", ECHO, stopped=True)])
    write(tmp_path, 1, [case("ok", None), case("swap", "it raised KeyError", True)])
    write(tmp_path, 2, [case("ok", None)], wait="recv from rank 1 at mine.py:4")
    outcome = merge(str(tmp_path), 3)
    assert [c["title"] for c in outcome.cases] == ["ok", "swap"]
    swap = outcome.cases[1]
    assert (swap["rank"], swap["failure"]) == (1, "it raised KeyError")
    assert outcome.stopped == "it raised KeyError" and not outcome.passed
    assert outcome.waits == {2: "recv from rank 1 at mine.py:4"}


def test_every_case_passing_on_every_rank_passes(tmp_path) -> None:
    for rank in range(2):
        write(tmp_path, rank, [case("a", None), case("b", None)])
    outcome = merge(str(tmp_path), 2)
    assert outcome.passed and outcome.stopped is None and outcome.waits == {}
    assert (outcome | {"died": "rank 1 ended without a word"}).passed is False
