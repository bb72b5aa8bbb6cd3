"""B then W equals one ordinary backward: input gradients at once, Linear weight
gradients only when W runs, LayerNorm's in B; forward restored afterwards."""

from __future__ import annotations

import torch
import torch.nn as nn

from snippets.parallel.pipeline_weight_grad import (
    SplitLinear,
    WeightGradients,
    split_backward,
)


def net() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Linear(5, 7), nn.GELU(), nn.LayerNorm(7), nn.Linear(7, 3, bias=False)
    ).double()


def test_b_then_w_equals_one_backward() -> None:
    ours, ref = net(), net()
    x = torch.randn(2, 4, 5, dtype=torch.float64)
    xo, xr = x.clone().requires_grad_(), x.clone().requires_grad_()
    ref(xr).sin().sum().backward()
    store = WeightGradients()
    with split_backward(ours, store):
        for key in ("a", "b"):  # two micro-batches, W of both at the end
            store.key = key
            ours(xo).sin().sum().backward(retain_graph=True)
        assert ours[0].weight.grad is None and ours[3].weight.grad is None
        assert ours[2].weight.grad is not None  # LayerNorm: in B
        torch.testing.assert_close(xo.grad, 2 * xr.grad, rtol=0, atol=1e-13)
        assert store.run("a") == 2 and store.run("a") == 0  # two Linears, once
        assert store.run("b") == 2
    for p, q in zip(ours.parameters(), ref.parameters()):
        torch.testing.assert_close(p.grad, 2 * q.grad, rtol=0, atol=1e-13)
    assert all("forward" not in m.__dict__ for m in ours.modules())  # restored
    y = ours(x)  # the class's forward again: no SplitLinear in the graph
    assert "SplitLinear" not in type(y.grad_fn).__name__


def test_a_shared_weight_sums_both_uses() -> None:
    w = torch.randn(4, 4, dtype=torch.float64, requires_grad=True)
    x = torch.randn(3, 4, dtype=torch.float64)
    store = WeightGradients()
    y = SplitLinear.apply(SplitLinear.apply(x, w, None, store), w, None, store)
    y.sum().backward()
    store.run(None)
    w_ref = w.detach().clone().requires_grad_()
    (x @ w_ref.T @ w_ref.T).sum().backward()
    torch.testing.assert_close(w.grad, w_ref.grad, rtol=0, atol=1e-13)
