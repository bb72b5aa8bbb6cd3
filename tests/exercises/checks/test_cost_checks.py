"""The step's FLOPs and Young–Daly's interval: known-wrong answers are rejected with the
hint that names them (the project's own and the stubs: test_every_exercise)."""

from __future__ import annotations

import pytest
from grading import graded_fixture, wrong  # noqa: F401


@pytest.mark.parametrize(
    "name, mistake, says",
    [
        ("step_flops", "no_dw", "hint: backward has two matmuls a forward one"),
        ("step_flops", "no_head", "hint: the head (d × V) is a matmul too"),
        ("young_daly", "no_two", "hint: √(δM) is short by √2"),
        ("young_daly", "no_root", "hint: take the square root"),
    ],
)
def test_known_wrong_answers_are_named(graded, name, mistake, says) -> None:
    code, out = graded(name, wrong(f"{name}_{mistake}"))
    assert code == 1 and says in out, out
