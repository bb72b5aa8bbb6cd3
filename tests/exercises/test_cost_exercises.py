"""The step's FLOPs and Young–Daly's interval: the project's own pass, the stubs fail
with exit 1, and known-wrong answers are rejected with the hint that names them."""

from __future__ import annotations

import pytest
from grading import graded_fixture, solution_file, wrong  # noqa: F401

from snippets.exercises import grader
from snippets.exercises.catalog import exercise


@pytest.mark.parametrize("name", ["step_flops", "young_daly"])
def test_the_projects_solution_passes_and_the_stub_fails(graded, name, tmp_path):
    code, out = graded(name, solution_file(exercise(name)))
    assert code == 0, out
    stub = tmp_path / f"{name}.py"
    stub.write_text(grader.stub(exercise(name), "check"))
    code, out = graded(name, stub)
    assert code == 1 and "NotImplementedError" in out, out


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
