"""The exercise command: bad input is one line and exit 2 with nothing lost; start
never overwrites; progress is kept; solution prints what the note shows."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
from conftest import REPO, refused
from grading import graded_fixture, solution_file  # noqa: F401

from snippets.exercises import engine, exercise_cli
from snippets.exercises.catalog import exercise, exercises


def cli(*args: str, cwd=None, env=None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "snippets", "exercise", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=120,
    )


@pytest.fixture
def progress(tmp_path, monkeypatch):
    path = tmp_path / "progress.json"
    monkeypatch.setenv(exercise_cli.PROGRESS_VARIABLE, str(path))
    return path


def one_line_exit_2(capfd, argv: list[str]) -> str:
    return refused(argv, capfd, entry=exercise_cli.main)


def test_bad_input_is_one_line_and_exit_2(tmp_path, capfd, progress) -> None:
    ok = tmp_path / "ok.py"
    ok.write_text(solution_file(exercise("ring_allreduce")).read_text())
    err = one_line_exit_2(capfd, ["check", "ring_allreduc", str(ok)])
    assert "no exercise called 'ring_allreduc'" in err and "ring_allreduce" in err
    err = one_line_exit_2(capfd, ["check", "ring_allreduce", str(tmp_path / "no.py")])
    assert "no such file" in err
    broken = tmp_path / "broken.py"
    broken.write_text("def ring_allreduce(tensor, op, group):\n    return (\n")
    err = one_line_exit_2(capfd, ["check", "ring_allreduce", str(broken)])
    assert re.search(r"line 2, column \d+", err), err
    other = tmp_path / "other.py"
    other.write_text("def ring_all_reduce(tensor, op=None, group=None):\n    pass\n")
    err = one_line_exit_2(capfd, ["check", "ring_allreduce", str(other)])
    assert "has no function ring_allreduce" in err
    shape = tmp_path / "shape.py"
    shape.write_text("def ring_allreduce(tensor, group=None):\n    pass\n")
    err = one_line_exit_2(capfd, ["check", "ring_allreduce", str(shape)])
    assert "should take (tensor, op, group)" in err
    err = one_line_exit_2(capfd, ["check", "ring_allreduce", str(ok), "-n", "0"])
    assert "-n" in err or "0" in err
    assert not progress.exists()  # nothing graded, nothing recorded
    assert ok.read_text() == solution_file(exercise("ring_allreduce")).read_text()


def test_start_writes_the_contract_and_never_overwrites(tmp_path, capfd) -> None:
    folder = tmp_path / "mine"
    assert exercise_cli.main(["start", "ring_allreduce", "--dir", str(folder)]) == 0
    file = folder / "ring_allreduce.py"
    text = file.read_text()
    ex = exercise("ring_allreduce")
    assert ex.contract.splitlines()[0] in text
    assert all(h in text for h in ex.hints)
    assert "raise NotImplementedError" in text
    assert engine.load(ex, str(file))  # the stub itself has the right signature
    file.write_text(text + "# mine\n")
    err = one_line_exit_2(capfd, ["start", "ring_allreduce", "--dir", str(folder)])
    assert "exists" in err and file.read_text().endswith("# mine\n")
    assert (
        exercise_cli.main(["start", "ring_allreduce", "--dir", str(folder), "--force"])
        == 0
    )
    assert not file.read_text().endswith("# mine\n")


def test_progress_is_kept_and_list_reads_it(graded, tmp_path, capsys) -> None:
    stub = tmp_path / "ring_allreduce.py"
    stub.write_text(engine.stub(exercise("ring_allreduce"), "check"))
    assert graded("ring_allreduce", stub, "-n", "2")[0] == 1
    assert exercise_cli.main(["list"]) == 0
    row = next(
        line
        for line in capsys.readouterr().out.splitlines()
        if "ring_allreduce" in line
    )
    assert row.split()[1] == "tried"
    solution = solution_file(exercise("ring_allreduce"))
    assert graded("ring_allreduce", solution, "-n", "2")[0] == 0
    exercise_cli.main(["list"])
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if "ring_allreduce" in line)
    assert row.split()[1] == "passed"
    assert f"1 of {len(exercises())} passed" in out
    record = json.loads(exercise_cli.progress_path().read_text())
    assert record["ring_allreduce"]["last_passed"] is True


def test_an_unreadable_progress_file_is_left_as_it_is(progress, capfd) -> None:
    progress.write_text("{not json")
    err = one_line_exit_2(capfd, ["list"])
    assert str(progress) in err
    assert progress.read_text() == "{not json"


def test_solution_prints_the_section_the_note_shows() -> None:
    for ex in exercises():
        file, section = ex.solution.rsplit(":", 1)
        note = (REPO / "docs/blog/posts" / f"{ex.note}.md").read_text()
        assert f'"{file}:{section}"' in note, f"{ex.note} does not show {ex.solution}"
        shown = exercise_cli.solution_text(ex)
        assert f"def {ex.function.__name__}(" in shown


def test_the_command_runs_from_the_shell() -> None:
    done = cli("solution", "ring_allreduce", cwd=REPO)
    assert done.returncode == 0 and "def ring_allreduce(" in done.stdout


def test_start_refuses_an_exercise_it_does_not_know(
    tmp_path, monkeypatch, capfd
) -> None:
    monkeypatch.chdir(tmp_path)
    assert "nope" in refused(["exercise", "start", "nope"], capfd)
    assert list(tmp_path.iterdir()) == []
