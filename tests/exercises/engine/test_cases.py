"""One case's verdict: the first element that differs (found here by a plain loop
over the values), a value never written named as such, a known mistake's hint, and
only the first failure kept."""

from __future__ import annotations

import itertools
from types import SimpleNamespace

import torch

from snippets.exercises.engine.cases import Case


def first_difference(got: torch.Tensor, expected: torch.Tensor) -> tuple:
    for index in itertools.product(*map(range, expected.shape)):
        if got[index].item() != expected[index].item():
            return index
    raise AssertionError("no difference")


def test_the_first_element_that_differs_is_named_with_both_values() -> None:
    expected = torch.arange(12.0).view(3, 4)
    got = expected.clone()
    got[1, 2], got[2, 0] = -4.0, 99.0
    case = Case(SimpleNamespace(), "sum")
    assert not case.equal(got, expected)
    i, j = first_difference(got, expected)
    assert (
        case.failure
        == f"the result[{i}, {j}]: expected {expected[i, j].item():g}, got -4"
    )


def test_a_value_never_written_is_said_and_a_known_mistake_gives_its_hint() -> None:
    expected = torch.tensor([3.0, 3.0, 3.0])
    case = Case(SimpleNamespace(), "sum")
    case.equal(torch.tensor([3.0, -100.0, 3.0]), expected, unwritten=-100.0)
    assert case.failure.endswith(
        "got -100 (-100 is what it held before: never written)"
    )
    doubled = Case(SimpleNamespace(), "sum")
    doubled.equal(expected * 2, expected, mistakes=((expected * 2, "summed twice"),))
    assert doubled.detail == ["hint: summed twice"]
    doubled.fail("a later failure")
    assert doubled.failure.startswith("the result[0]")  # the first one counts


def test_shapes_types_and_numbers_are_refused_in_words() -> None:
    case = Case(SimpleNamespace(), "sum")
    assert not case.equal([1.0], torch.ones(1))
    assert case.failure == "the result is list, not a tensor"
    shaped = Case(SimpleNamespace(), "sum")
    assert not shaped.equal(torch.ones(2, 3), torch.ones(3, 2))
    assert shaped.failure == "the result has shape (2, 3), not (3, 2)"
    counted = Case(SimpleNamespace(), "count")
    assert counted.number("7", "the count").item() == 7.0
    assert counted.number("seven", "the count") is None
    assert counted.failure == "the count is str, not a number"
