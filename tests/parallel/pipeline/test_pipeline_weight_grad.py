"""B then W equals one ordinary backward: input gradients at once, Linear weight
gradients only when W runs, LayerNorm's in B; the split gone afterwards. The
tensor-parallel Linears of a block (two ranks) wait for W too, and under sequence
parallel so do the gathered ones; the gradients equal the dense block's."""

from __future__ import annotations

import copy

import torch
import torch.nn as nn

from snippets.core.compare import max_difference
from snippets.core.runtime import launch
from snippets.models.tiny_gpt import GPT, GPTConfig
from snippets.parallel.pipeline.pipeline_weight_grad import (
    SplitLinear,
    WeightGradients,
    deferring,
    split_backward,
)
from snippets.parallel.tensor.sequence_parallel import (
    allreduce_sequence_grads,
    sequence_parallel_block,
)
from snippets.parallel.tensor.tensor_parallel import own_block
from snippets.parallel.tensor.tp_gpt import own_part, parallelize_block


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
        assert deferring(ours[0].weight) is store and deferring(xo) is None
        with torch.no_grad():
            assert deferring(ours[0].weight) is None  # no graph, nothing to defer
        torch.testing.assert_close(xo.grad, 2 * xr.grad, rtol=0, atol=1e-13)
        assert store.run("a") == 2 and store.run("a") == 0  # two Linears, once
        assert store.run("b") == 2
    for p, q in zip(ours.parameters(), ref.parameters()):
        torch.testing.assert_close(p.grad, 2 * q.grad, rtol=0, atol=1e-13)
    assert deferring(ours[0].weight) is None
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


def tensor_parallel_b_then_w() -> dict:
    """On each rank: one block cut by tp (then by sp), B inside split_backward, then
    W; the gradients each time against the dense block's, by name."""
    dense = GPT(GPTConfig(n_head=2), seed=3).double().blocks[0]
    cuts = {"tp": parallelize_block, "sp": sequence_parallel_block}
    ours = {name: cut(copy.deepcopy(dense)) for name, cut in cuts.items()}
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, 16, 32, dtype=torch.float64, generator=g)  # (B, N, d)
    x_dense = x.clone().requires_grad_()
    dense(x_dense).sin().sum().backward()  # Σ over the tokens: the shards add up
    out = {}
    for name, block in ours.items():
        mine = x if name == "tp" else own_block(x, dim=1)  # sp: (B, N/t, d)
        mine = mine.clone().requires_grad_()
        store = WeightGradients()
        with split_backward(block, store):
            block(mine).sin().sum().backward(retain_graph=True)  # B
        after_b = sorted(n for n, p in block.named_parameters() if p.grad is None)
        products = store.run(None)  # W
        allreduce_sequence_grads(block)  # sp: the LayerNorms' N/t parts
        want = x_dense.grad if name == "tp" else own_block(x_dense.grad, dim=1)
        out[name] = {
            "missing_after_b": after_b,
            "products": products,
            "d_input": (mine.grad - want).abs().max().item(),
            "d_grads": max_difference(block, dense, grads=True, part=own_part),
        }
    return out


def test_tensor_parallel_weights_wait_for_w() -> None:
    ranks = launch(tensor_parallel_b_then_w, 2, "gloo", timeout_s=60)
    column = [f"{n}.{w}" for n in ("attn.q", "attn.k", "attn.v", "mlp.fc")
              for w in ("weight", "bias")]  # fmt: skip
    row = ["attn.proj.weight", "mlp.proj.weight"]  # bias added after the sum: in B
    for tp, sp in (rank.values() for rank in ranks):
        assert tp["missing_after_b"] == sorted(column + row)
        assert tp["products"] == 6
        # sequence parallel: q, k, v (one filing) and fc file theirs from their
        # own autograd function, with the gather they need
        assert sp["missing_after_b"] == sorted(column + row)
        assert sp["products"] == 4
        for r in (tp, sp):
            assert r["d_input"] < 1e-12 and r["d_grads"] < 1e-12, r
