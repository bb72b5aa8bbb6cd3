"""The pipeline-plan exercises: the project's 1F1B plan and bubble formula pass; the
stubs and known-wrong solutions fail, each with the message that names its mistake."""

from __future__ import annotations

import pytest
from grading import graded_fixture, solution_file, wrong  # noqa: F401

from snippets.exercises import grader
from snippets.exercises.catalog import exercise

NAMES = ("one_f_one_b", "bubble_fraction")


@pytest.mark.parametrize("name", NAMES)
def test_the_projects_solutions_pass(graded, name) -> None:
    code, out = graded(name, solution_file(exercise(name)))
    assert code == 0, out
    assert "in one process" in out and "FAIL" not in out


@pytest.mark.parametrize("name", NAMES)
def test_the_untouched_stubs_fail_with_exit_1(graded, tmp_path, name) -> None:
    stub = tmp_path / f"{name}.py"
    stub.write_text(grader.stub(exercise(name), "check"), encoding="utf-8")
    code, out = graded(name, stub)
    assert code == 1, out
    assert "NotImplementedError" in out


@pytest.mark.parametrize(
    "name, mistake, says",
    [
        ("one_f_one_b", "warmup_short", "hint: the warm-up is one micro-batch short"),
        ("one_f_one_b", "gpipe", "hint: every forward runs first: that is GPipe"),
        ("one_f_one_b", "unclamped", "hint: with m < p the warm-up has only m"),
        ("bubble_fraction", "of_ideal", "hint: (p - 1)/m is the idle time over the"),
        ("bubble_fraction", "p_over", "hint: p/(m + p): each rank idles p - 1"),
    ],
)
def test_known_wrong_solutions_are_rejected(graded, name, mistake, says) -> None:
    code, out = graded(name, wrong(f"{name}_{mistake}"))
    assert code == 1, out
    assert says in out, out


def test_a_plan_that_deadlocks_says_where_each_rank_waits(graded, tmp_path) -> None:
    file = tmp_path / "one_f_one_b.py"
    file.write_text(
        "from snippets.parallel.pipeline.pipeline_schedules import Action\n\n\n"
        "def one_f_one_b(p, m, rank):\n"
        "    if rank == p - 1:  # forwards from the last micro-batch back\n"
        "        return [Action(k, j) for k in 'FB' for j in range(m)[::-1]]\n"
        "    return [Action(k, j) for j in range(m) for k in 'FB']\n"
    )
    code, out = graded("one_f_one_b", file)
    assert code == 1, out
    assert "not runnable: deadlock: rank 0 at B0, rank 1 at F3" in out, out
