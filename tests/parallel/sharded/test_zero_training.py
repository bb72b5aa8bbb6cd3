"""ZeRO training helpers: deterministic batches, the single-process oracle equals a
hand-written SGD step, max_difference is the largest absolute gap."""

from __future__ import annotations

import torch

from snippets.models.tiny_gpt import GPT, GPTConfig
from snippets.parallel.sharded import zero_training as zt

CFG = GPTConfig(vocab_size=16, block_size=8, n_layer=1, n_head=2, n_embd=16)


def test_batches_shape_range_and_seed() -> None:
    data = zt.batches(CFG, steps=3, rows=5)
    assert len(data) == 3
    for idx, targets in data:
        assert idx.shape == targets.shape == (5, 8)
        assert 0 <= int(idx.min()) and int(idx.max()) < 16
    again = zt.batches(CFG, steps=3, rows=5)
    assert all(torch.equal(a, b) for a, b in zip(data, again))
    assert not torch.equal(data[0], zt.batches(CFG, 1, 5, seed=2)[0])


def test_train_single_is_two_plain_sgd_steps() -> None:
    data = zt.batches(CFG, steps=2, rows=3)
    torch.manual_seed(0)
    got = zt.train_single(CFG, torch.optim.SGD, {"lr": 0.1}, data, torch.float64)
    torch.manual_seed(0)
    model = GPT(CFG).to(torch.float64)
    for idx, targets in data:
        model.zero_grad()
        model(idx, targets)[1].backward()
        with torch.no_grad():
            for p in model.parameters():
                p -= 0.1 * p.grad
    want = model.state_dict()
    assert zt.max_difference(got, want) < 1e-12
    assert zt.max_difference(got, GPT(CFG).to(torch.float64).state_dict()) > 1e-3


def test_max_difference_by_hand() -> None:
    a = {"x": torch.tensor([1.0, 5.0]), "y": torch.tensor([[0.0]])}
    b = {"x": torch.tensor([1.5, 2.0]), "y": torch.tensor([[-0.25]])}
    assert zt.max_difference(a, b) == 3.0
