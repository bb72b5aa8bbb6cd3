"""Layer split: stages chained equal the whole model; GPipe's bubble is
(p - 1)/(m + p - 1)."""

from __future__ import annotations

from fractions import Fraction

import pytest
import torch

from snippets.core.runtime import launch
from snippets.models.tiny_gpt import GPT, GPTConfig
from snippets.parallel import layer_split as ls

CFG = GPTConfig(vocab_size=16, block_size=8, n_layer=3, n_head=2, n_embd=16)


@pytest.mark.parametrize(("n", "parts"), [(7, 3), (5, 5), (3, 1), (10, 4)])
def test_parts_are_tensor_split_pieces(n: int, parts: int) -> None:
    pieces = torch.arange(n).tensor_split(parts)
    assert ls.split_sizes(n, parts, "x") == [len(t) for t in pieces]
    for i, t in enumerate(pieces):
        assert list(ls.part(n, parts, i, "x")) == t.tolist()
    with pytest.raises(ValueError):
        ls.split_sizes(n, n + 1, "x")


@pytest.mark.parametrize("p", [1, 2, 3])
def test_stages_chained_equal_the_whole_model(p: int) -> None:
    torch.manual_seed(0)
    model = GPT(CFG)
    idx = torch.randint(16, (3, 8))
    a = idx
    for rank in range(p):
        a = ls.run_stage(model, rank, p, a)
    torch.testing.assert_close(a, model(idx)[0])


def test_bubble_of_hand_made_schedules() -> None:
    # p = 3, m = 2: 3 × 4 grid, 6 busy slots → 1/2 = (3 - 1)/(2 + 3 - 1)
    gpipe = [[(0, s), (1, s + 1)] for s in range(3)]
    assert ls.bubble_fraction(gpipe) == Fraction(1, 2) == ls.gpipe_bubble(3, 2)
    assert ls.gpipe_bubble(4, 4) == Fraction(3, 7)
    assert ls.gpipe_bubble(1, 8) == 0


def pipeline() -> dict:
    torch.manual_seed(0)
    model = GPT(CFG)
    idx = torch.randint(16, (5, 8))
    ref = model(idx)[0]
    y, schedule = ls.gpipe_forward(model, idx, 3)
    y_mp = ls.layer_split_forward(model, idx)
    if y is None:
        return {"schedule": schedule, "mp": y_mp is None}
    return {
        "schedule": schedule,
        "pp": (y - ref).abs().max().item(),
        "mp": (y_mp - ref).abs().max().item(),
    }


def test_two_stage_gpipe_matches_the_model_and_the_formula() -> None:
    first, last = launch(pipeline, 2, backend="gloo", timeout_s=30)
    assert first["mp"] is True
    assert last["pp"] < 1e-5 and last["mp"] < 1e-5
    assert first["schedule"] == [(0, 0), (1, 1), (2, 2)]
    assert last["schedule"] == [(0, 1), (1, 2), (2, 3)]
    schedules = [first["schedule"], last["schedule"]]
    assert ls.bubble_fraction(schedules) == Fraction(2 - 1, 3 + 2 - 1)
