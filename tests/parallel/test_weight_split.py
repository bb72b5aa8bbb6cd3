"""Weight split: row and column slices recombine to the dense Linear; the split block
on two ranks gives the dense block's output and gradient slices."""

from __future__ import annotations

import torch
import torch.nn as nn

from snippets.core.runtime import launch
from snippets.models.tiny_gpt import Block, GPTConfig
from snippets.parallel import weight_split as ws

CFG = GPTConfig(vocab_size=16, block_size=8, n_layer=1, n_head=2, n_embd=16)


def test_kept_rows_are_the_dense_outputs() -> None:
    torch.manual_seed(0)
    lin, x = nn.Linear(6, 7), torch.randn(4, 6)
    cut = ws.keep_rows(lin, range(2, 5))
    assert cut.weight.shape == (3, 6)
    torch.testing.assert_close(cut(x), lin(x)[:, 2:5])


def test_column_parts_plus_bias_once_sum_to_the_dense() -> None:
    torch.manual_seed(0)
    lin, x = nn.Linear(7, 5), torch.randn(4, 7)
    total = 0
    for cols in (range(0, 3), range(3, 5), range(5, 7)):  # odd: 3 uneven parts
        cut, bias = ws.keep_columns(lin, cols)
        assert cut.bias is None
        total = total + cut(x[:, cols.start : cols.stop])
    torch.testing.assert_close(total + bias, lin(x))


def split_vs_dense() -> dict:
    torch.manual_seed(0)
    dense = Block(CFG)
    x = torch.randn(2, 8, 16, requires_grad=True)
    split = ws.weight_split_block(dense)
    y = split(x)
    y.pow(2).sum().backward()
    gx = x.grad.clone()
    x.grad = None
    ref = dense(x)
    ref.pow(2).sum().backward()
    dense_params = dict(dense.named_parameters())
    grad_diff = 0.0
    for name, (source, index) in ws.dense_parts(split).items():
        want = dense_params[source].grad[index]
        got = dict(split.named_parameters())[name].grad
        grad_diff = max(grad_diff, (got - want).abs().max().item())
    return {
        "y": (y - ref).abs().max().item(),
        "x_grad": (gx - x.grad).abs().max().item(),
        "grad": grad_diff,
        "heads": list(split.heads),
    }


def test_two_ranks_match_the_dense_block() -> None:
    results = launch(split_vs_dense, 2, backend="gloo", timeout_s=30)
    assert [r["heads"] for r in results] == [[0], [1]]
    for r in results:
        assert r["y"] < 1e-5 and r["x_grad"] < 1e-5 and r["grad"] < 1e-5
