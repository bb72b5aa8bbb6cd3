"""The collectives' exercises: the project's solution passes, the stub and known-wrong
solutions fail, each with the message that names its mistake."""

from __future__ import annotations

import pytest
from grading import graded_fixture, solution_file, wrong  # noqa: F401

from snippets.exercises import grader
from snippets.exercises.catalog import exercise


def test_the_projects_ring_allreduce_passes_at_three_and_four_ranks(graded) -> None:
    code, out = graded("ring_allreduce", solution_file(exercise("ring_allreduce")))
    assert code == 0, out
    assert "on 4 ranks" in out and "on 3 ranks" in out
    assert "FAIL" not in out


def test_the_untouched_stub_fails_with_exit_1(graded, tmp_path) -> None:
    ex = exercise("ring_allreduce")
    stub = tmp_path / "ring_allreduce.py"
    stub.write_text(grader.stub(ex, "check"), encoding="utf-8")
    code, out = graded("ring_allreduce", stub, "-n", "3")
    assert code == 1, out
    assert "NotImplementedError" in out


@pytest.mark.parametrize(
    "mistake, says",
    [
        ("builtin", "calls torch.distributed.all_reduce"),
        ("averaged", "hint: each element is the sum ÷ p"),
        ("off_by_one", "FAIL  SUM of a (1,) tensor"),
    ],
)
def test_known_wrong_ring_allreduces_are_rejected(graded, mistake, says) -> None:
    code, out = graded("ring_allreduce", wrong(f"ring_allreduce_{mistake}"), "-n", "3")
    assert code == 1, out
    assert says in out, out


def test_a_deadlocked_ring_is_stopped_and_each_rank_says_where_it_waited(
    graded,
) -> None:
    file = wrong("ring_allreduce_recv_first")
    code, out = graded("ring_allreduce", file, "-n", "3", "--timeout", "2")
    assert code == 1, out
    for rank, left in ((0, 2), (1, 0), (2, 1)):
        assert f"rank {rank} waited on recv from rank {left}" in out, out
    assert "line 12, in ring_allreduce: dist.recv(" in out
