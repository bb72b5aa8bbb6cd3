"""The pipeline-plan exercises: known-wrong plans and bubble formulas fail, each with
the message that names its mistake (the project's own and the stubs:
test_every_exercise)."""

from __future__ import annotations

import pytest
from grading import graded_fixture, wrong  # noqa: F401


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
