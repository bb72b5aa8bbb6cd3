"""The attention exercises: the project's own merge, tiled forward and ring pass; the
stubs and known-wrong solutions fail, each with the message that names its mistake."""

from __future__ import annotations

import pytest
from grading import graded_fixture, solution_file, wrong  # noqa: F401

from snippets.exercises import grader
from snippets.exercises.catalog import exercise

NAMES = ("online_softmax_merge", "flash_forward", "ring_attention_forward")


@pytest.mark.parametrize("name", NAMES[:2])
def test_the_projects_single_process_solutions_pass(graded, name) -> None:
    code, out = graded(name, solution_file(exercise(name)))
    assert code == 0, out
    assert "in one process" in out and "FAIL" not in out


def test_the_projects_ring_forward_passes_at_two_and_three_ranks(graded) -> None:
    name = "ring_attention_forward"
    code, out = graded(name, solution_file(exercise(name)))
    assert code == 0, out
    assert "on 2 ranks" in out and "on 3 ranks" in out
    assert "FAIL" not in out


@pytest.mark.parametrize("name", NAMES)
def test_the_untouched_stubs_fail_with_exit_1(graded, tmp_path, name) -> None:
    stub = tmp_path / f"{name}.py"
    stub.write_text(grader.stub(exercise(name), "check"), encoding="utf-8")
    options = ("-n", "3") if exercise(name).distributed else ()
    code, out = graded(name, stub, *options)
    assert code == 1, out
    assert "NotImplementedError" in out


@pytest.mark.parametrize(
    "name, mistake, says",
    [
        ("online_softmax_merge", "no_rescale", "hint: the older sum d_a is not resc"),
        ("online_softmax_merge", "one_side", "hint: d_b is not rescaled"),
        ("online_softmax_merge", "nan", "hint: NaN where a row is all -inf"),
        ("flash_forward", "unnormalised", "hint: O is not divided by the row sum"),
        ("flash_forward", "diagonal", "hint: the diagonal is masked"),
        ("flash_forward", "whole", "the whole 37x37 score matrix?"),
        ("ring_attention_forward", "short", "hint: the keys of rank 1 are missing"),
        ("ring_attention_forward", "builtin", "calls torch.distributed.all_gather"),
    ],
)
def test_known_wrong_solutions_are_rejected(graded, name, mistake, says) -> None:
    options = ("-n", "2") if exercise(name).distributed else ()
    code, out = graded(name, wrong(f"{name}_{mistake}"), *options)
    assert code == 1, out
    assert says in out, out


def test_a_merge_that_never_returns_is_stopped_at_its_line(graded) -> None:
    file = wrong("online_softmax_merge_loops")
    code, out = graded("online_softmax_merge", file, "--timeout", "2")
    assert code == 1, out
    assert "it ran past the 2 s timeout" in out
    assert "line 10, in merge: while not bool((m >= b.m).all()):" in out
