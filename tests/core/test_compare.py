"""max_difference against gaps placed by hand: the largest one is found whichever
tensor, element or form (tensor, mapping, module) holds it, a NaN is never hidden,
every name compared must be the oracle's, and a part of the oracle is compared where
the found tensor is cut."""

from __future__ import annotations

import copy
import math

import pytest
import torch
import torch.nn as nn

from snippets.core.compare import max_difference


def test_tensors_by_hand() -> None:
    a = torch.tensor([[1.0, 5.0], [0.0, -2.0]])
    b = torch.tensor([[1.5, 2.0], [0.0, -2.25]])
    assert max_difference(a, b) == 3.0  # |5 − 2|, not the first or the last gap
    assert max_difference(torch.empty(0), torch.empty(0)) == 0.0


def test_mappings_take_the_largest_gap_over_the_names() -> None:
    a = {"x": torch.tensor([1.0, 5.0]), "y": torch.tensor([[0.0]])}
    b = {"x": torch.tensor([1.5, 2.0]), "y": torch.tensor([[-4.0]])}
    assert max_difference(a, b) == 4.0  # in y, the second name
    assert max_difference(b, a) == 4.0
    with pytest.raises(ValueError, match="'z'"):  # a name the oracle lacks
        max_difference({**a, "z": torch.zeros(1)}, b)
    part = {"y": a["y"]}  # a part of the model, as a pipeline stage holds
    assert max_difference(part, b) == 4.0 and max_difference({"x": a["x"]}, b) == 3.0


def test_a_nan_is_the_answer_wherever_it_is() -> None:
    for where in (0, 1):
        a = {"x": torch.tensor([9.0]), "y": torch.tensor([1.0])}
        b = {"x": torch.tensor([0.0]), "y": torch.tensor([1.0])}
        list(a.values())[where][0] = math.nan
        assert math.isnan(max_difference(a, b)), where


def test_modules_compare_parameters_or_gradients() -> None:
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(3, 4), nn.Linear(4, 2))
    other = copy.deepcopy(net)
    assert max_difference(net, other) == 0.0
    with torch.no_grad():
        other[1].bias[1] += 0.5
    assert max_difference(net, other) == pytest.approx(0.5)
    for m in (net, other):
        m(torch.ones(1, 3)).sum().backward()
    with torch.no_grad():
        other[0].weight.grad[2, 1] -= 2.0
    assert max_difference(net, other, grads=True) == pytest.approx(2.0)


def test_gradients_left_out_only_where_found_has_none() -> None:
    torch.manual_seed(0)
    whole = nn.Sequential(nn.Linear(3, 3), nn.Linear(3, 3))
    stage = copy.deepcopy(whole)
    for m in (whole, stage):
        m(torch.ones(1, 3)).sum().backward()
    stage[0].weight.grad = stage[0].bias.grad = None  # a stage that runs layer 1 only
    with torch.no_grad():
        whole[0].weight.grad += 7.0  # not this stage's: not compared
        stage[1].weight.grad[0, 0] += 0.25
    assert max_difference(stage, whole, grads=True) == pytest.approx(0.25)
    with pytest.raises(ValueError, match="no gradient"):
        max_difference(whole, stage, grads=True)


def test_part_compares_the_block_found_holds() -> None:
    dense = torch.arange(12.0).view(3, 4)
    cut = dense[:, 2:].clone()  # columns 2 and 3, as a rank of two would hold them
    cut[1, 0] += 0.5

    def columns(full: torch.Tensor, mine: torch.Tensor) -> torch.Tensor:
        return full[:, full.shape[1] - mine.shape[1] :]

    assert max_difference({"w": cut}, {"w": dense}, part=columns) == 0.5
