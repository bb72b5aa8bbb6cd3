"""The catalog: every exercise once, tied to a note that exists, in reading order."""

from __future__ import annotations

import pytest
from conftest import REPO

from snippets.core.errors import UsageError
from snippets.exercises.catalog import SERIES, exercise, exercises, note_facts


def test_names_are_unique_and_each_note_exists() -> None:
    names = [ex.name for ex in exercises()]
    assert len(names) == len(set(names))
    for ex in exercises():
        assert (REPO / "docs/blog/posts" / f"{ex.note}.md").is_file(), ex.note


def test_exercises_follow_the_series_and_their_parts() -> None:
    keys = []
    for ex in exercises():
        facts = note_facts(ex.note)
        assert facts["series"] in SERIES, facts
        keys.append((SERIES.index(facts["series"]), facts["part"]))
    assert keys == sorted(keys)


def test_series_are_the_sites_categories() -> None:
    config = (REPO / "mkdocs.yml").read_text()
    block = config.split("categories_allowed:")[1].split("\n  - ")[0]
    listed = [line.strip()[2:] for line in block.splitlines() if line.strip()]
    assert tuple(listed) == SERIES


def test_an_unknown_name_is_a_usage_error_naming_the_nearest() -> None:
    with pytest.raises(UsageError, match="did you mean ring_allreduce"):
        exercise("ring_alreduce")
