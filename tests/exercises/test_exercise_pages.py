"""The pages the exercises write: each note with an exercise ends with its "Try it
yourself", each series has a page listing its exercises in order, and a run whose
own solution fails writes nothing."""

from __future__ import annotations

import json

import pytest
from conftest import REPO

from snippets.exercises import engine, exercise_pages
from snippets.exercises.catalog import SERIES, exercise, exercises

POSTS = REPO / "docs" / "blog" / "posts"


def test_each_note_with_an_exercise_ends_with_try_it_yourself() -> None:
    for ex in exercises():
        text = (POSTS / f"{ex.note}.md").read_text(encoding="utf-8")
        last = text.rsplit("\n## ", 1)[1]
        assert last.startswith("Try it yourself"), ex.note
        assert f'--8<-- "results/exercise_pages.try-{ex.name}.md"' in last


def test_each_series_with_exercises_has_its_page_in_the_nav() -> None:
    config = (REPO / "mkdocs.yml").read_text(encoding="utf-8")
    series = {exercise_pages.series_slug(s) for s in SERIES}
    used = {
        exercise_pages.series_slug(exercise_pages.note_facts(ex.note)["series"])
        for ex in exercises()
    }
    assert used <= series
    for slug in used:
        page = REPO / "docs" / "exercises" / f"{slug}.md"
        assert f"results/exercise_pages.series-{slug}.md" in page.read_text()
        assert f"exercises/{slug}.md" in config


def test_try_it_gives_the_commands_the_contract_and_the_hints() -> None:
    ex = exercise("ring_allreduce")
    text = exercise_pages.try_it(ex, {"cases": 5, "world_size": 4})
    assert "N=ring_allreduce\npython -m snippets exercise start $N" in text
    assert "python -m snippets exercise check $N exercises/$N.py" in text
    block = text.split("```bash", 1)[1].split("```", 1)[0]
    assert max(map(len, block.splitlines())) <= 54  # fits the page's code width
    assert "def ring_allreduce(" in text and ex.contract.splitlines()[0] in text
    assert all(f"- {h}" in text for h in ex.hints)
    assert "# hint:" not in text  # the hints are listed once, not twice


def test_the_last_run_graded_every_exercise_in_reading_order(results_dir) -> None:
    record = json.loads((results_dir / "exercise_pages.json").read_text())
    names = [r["name"] for r in record["result"]["exercises"]]
    assert names == [ex.name for ex in exercises()]


def test_a_solution_that_fails_stops_the_run(monkeypatch) -> None:
    broken = engine.Outcome(3, [{"title": "x", "failure": "wrong", "rank": 0}])
    monkeypatch.setattr(engine, "check", lambda *args, **kw: broken)
    with pytest.raises(AssertionError, match="own solution failed"):
        exercise_pages.main()
