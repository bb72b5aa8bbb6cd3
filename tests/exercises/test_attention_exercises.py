"""The attention exercises' known-wrong solutions: each fails with the message that
names its mistake (the project's own and the stubs: test_every_exercise)."""

from __future__ import annotations

import pytest
from grading import graded_fixture, wrong  # noqa: F401

from snippets.exercises.catalog import exercise


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
