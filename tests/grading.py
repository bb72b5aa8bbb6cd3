"""Grading from the tests: the command's own code path, in this process.

``graded(name, file, *options)`` (a fixture: import ``graded_fixture``) runs ``python -m
snippets exercise check`` through its ``main`` (so a test sees the exit status and the
lines a reader sees) with the progress file in a temporary folder. Known-wrong solutions
live in ``wrong/``; each test holds one to the message that should point at its mistake.
``right/`` holds solutions written otherwise than the project's that keep the contract,
which must pass.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from conftest import REPO, process_children

from snippets.exercises import exercise_cli

WRONG = Path(__file__).parent / "exercises" / "wrong"
# learners' own ways that keep the contract
RIGHT = Path(__file__).parent / "exercises" / "right"


@pytest.fixture(name="graded")
def graded_fixture(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(exercise_cli.PROGRESS_VARIABLE, str(tmp_path / "progress.json"))

    def grade(name: str, file: Path | str, *options: str) -> tuple[int, str]:
        code = exercise_cli.main(["check", name, str(file), *options])
        out, err = capsys.readouterr()
        assert not process_children(os.getpid()), "a rank was left behind"
        return code, out + err

    return grade


def wrong(name: str) -> Path:
    return WRONG / f"{name}.py"


def right(name: str) -> Path:
    return RIGHT / f"{name}.py"


def solution_file(exercise) -> Path:
    """The project's own module that defines the exercise's function."""
    return REPO / exercise.solution.split(":")[0]
