"""hooks/notes.py: a series is read in the order its notes declare with ``part``, and
a missing, repeated or skipped part stops the build naming the file."""

from __future__ import annotations

import datetime
import importlib.util
import sys
from types import SimpleNamespace

import pytest
from conftest import REPO
from mkdocs.exceptions import PluginError


def load_notes():
    """hooks/notes.py, registered by name as mkdocs does (its dataclass needs it)."""
    spec = importlib.util.spec_from_file_location(
        "notes_hook", REPO / "hooks" / "notes.py"
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


notes = load_notes()


def note_file(name: str, series: str, part: int | None, date: str = "2026-12-01"):
    lines = ["---", f"title: {name}", f"date: {date}"]
    lines += [f"part: {part}"] if part is not None else []
    lines += ["categories:", f"  - {series}", "---", "", f"# {name}", ""]
    return SimpleNamespace(
        src_uri=f"blog/posts/{date}-{name}.md", content_string="\n".join(lines)
    )


def test_a_series_is_ordered_by_part_not_by_date_or_name() -> None:
    files = [
        note_file("a-uses", "S", 2),
        note_file("z-model", "S", 1),
        note_file("b-earlier", "T", 1, date="2026-11-01"),
    ]
    notes.on_files(files, None)
    series = notes.series_notes("S")
    assert [n.src_uri for n in series] == [files[1].src_uri, files[0].src_uri]
    assert "Part 1 of 2" in notes.part_line(series[0])
    # by date: the day's ties go by series, then part, never by file name
    assert [n.date for n in notes._notes] == sorted(n.date for n in notes._notes)
    assert notes._notes[0].date == datetime.date(2026, 11, 1)
    assert [n.part for n in notes._notes[1:]] == [1, 2]


@pytest.mark.parametrize(
    "parts, culprit, words",
    [
        ([1, None], "n1", "needs 'part: N'"),
        ([1, 1], "n1", "is also"),
        ([1, 3], "n1", "leaves a gap"),
        ([2], "n0", "leaves a gap"),
        ([1, 0], "n1", "needs 'part: N'"),
    ],
)
def test_a_missing_repeated_or_skipped_part_names_the_file(
    parts, culprit, words
) -> None:
    files = [note_file(f"n{i}", "S", p) for i, p in enumerate(parts)]
    with pytest.raises(PluginError) as err:
        notes.on_files(files, None)
    line = str(err.value)
    assert "\n" not in line
    assert line.startswith(f"blog/posts/2026-12-01-{culprit}.md: "), line
    assert words in line, line
