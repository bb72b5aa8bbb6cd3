"""Loading the reader's file: the names it must take, and a file that raises on
import graded (with its line), not refused."""

from __future__ import annotations

import pytest

from snippets.core.errors import UsageError
from snippets.exercises.catalog import exercise
from snippets.exercises.engine.reader_file import ImportFailed, load


def write(tmp_path, text: str) -> str:
    file = tmp_path / "mine.py"
    file.write_text(text)
    return str(file)


def test_more_parameters_are_allowed_only_with_defaults(tmp_path) -> None:
    ex = exercise("ring_allreduce")
    assert ex.parameters == ["tensor", "op", "group"]
    ok = "def ring_allreduce(tensor, op=None, group=None, *, trace=None):\n    pass\n"
    assert load(ex, write(tmp_path, ok))
    bad = "def ring_allreduce(tensor, op=None, group=None, *, trace):\n    pass\n"
    with pytest.raises(UsageError, match="should take"):
        load(ex, write(tmp_path, bad))


def test_a_file_that_raises_on_import_is_graded_not_refused(tmp_path) -> None:
    ex = exercise("ring_allreduce")
    with pytest.raises(ImportFailed, match=r"ZeroDivisionError.*line 1"):
        load(ex, write(tmp_path, "x = 1 / 0\n"))
