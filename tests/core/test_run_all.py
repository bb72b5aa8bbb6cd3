"""run_all: the results folder is checked before anything runs."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from snippets.core import run_all
from snippets.core.errors import UsageError


def test_writable_folder_is_made_and_left_empty(tmp_path: Path) -> None:
    target = tmp_path / "a" / "b"
    run_all.check_writable(target)
    assert target.is_dir() and list(target.iterdir()) == []


def test_a_file_in_the_way_is_a_usage_error(tmp_path: Path) -> None:
    blocker = tmp_path / "results"
    blocker.write_text("not a folder")
    with pytest.raises(UsageError, match="cannot write results to .*--results DIR"):
        run_all.check_writable(blocker / "inner")
    assert blocker.read_text() == "not a folder"


def test_unknown_only_name_fails_before_running(tmp_path: Path) -> None:
    opts = argparse.Namespace(
        results=str(tmp_path),
        backend="gloo",
        only=["no_such_snippet_xyz"],
        force=False,
        per_snippet_timeout=5.0,
    )
    with pytest.raises(UsageError):
        run_all.run_all(opts)
    assert list(tmp_path.iterdir()) == []
