"""run_all: the results folder is checked before anything runs."""

from __future__ import annotations

import argparse
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from snippets.core import run_all
from snippets.core.errors import UsageError
from snippets.core.runtime import Spec


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
        jobs=2,
    )
    with pytest.raises(UsageError):
        run_all.run_all(opts)
    assert list(tmp_path.iterdir()) == []


def test_timed_snippets_run_alone_and_the_rest_side_by_side(
    tmp_path: Path, monkeypatch, capsys
) -> None:
    """Two timed and four untimed stand-ins: a timed one never has company, untimed
    ones do overlap, and the report is in name order whatever order they finished."""
    names = ["a_timed", "b", "c", "d_timed", "e", "f"]
    entries = {
        n: SimpleNamespace(name=n, spec=Spec(summary=n, timed=n.endswith("_timed")))
        for n in names
    }
    running: set[str] = set()
    seen: dict[str, set[str]] = {}
    lock = threading.Lock()

    def fake_run_one(entry, results_dir, backend, timeout_s):
        with lock:
            running.add(entry.name)
        time.sleep(0.3)
        with lock:
            seen[entry.name] = set(running)
            running.discard(entry.name)
        return True, "0.3 s"

    monkeypatch.setattr(run_all.registry, "snippets_by_name", lambda: entries)
    monkeypatch.setattr(run_all, "run_one", fake_run_one)
    opts = argparse.Namespace(
        results=str(tmp_path),
        backend="gloo",
        only=None,
        force=True,
        per_snippet_timeout=5.0,
        jobs=2,
    )
    assert run_all.run_all(opts) == 0
    assert seen["a_timed"] == {"a_timed"} and seen["d_timed"] == {"d_timed"}
    assert any(len(seen[n]) == 2 for n in "bcef")  # side by side
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[1].rstrip(":") for line in lines] == names
