"""The MoE layer against a per-token loop in fp64 (top-1 and top-2, with and without
capacity, batch shapes), its dropped count against a count made here, dropped
assignments adding nothing, the auxiliary loss against Switch's eq. 4 written out, and
one-line refusals of impossible routing."""

from __future__ import annotations

import math

import pytest
import torch

from snippets.core.errors import UsageError
from snippets.models import moe as M

F64 = torch.float64


@pytest.mark.parametrize("k,c", [(1, None), (2, None), (1, 1.0), (2, 0.5), (3, 0.3)])
def test_equals_the_per_token_loop(k: int, c: float | None) -> None:
    layer = M.MoE(6, 10, 5, top_k=k, capacity_factor=c, seed=1).to(F64)
    x = torch.randn(3, 7, 6, dtype=F64, generator=torch.Generator().manual_seed(k))
    torch.testing.assert_close(layer(x), M.per_token(layer, x), rtol=0, atol=1e-12)


def dropped_by_hand(probs: torch.Tensor, k: int, capacity: int) -> int:
    """Count the overflow the slow way: walk the queue (first choices, then seconds)."""
    ranked = probs.argsort(dim=1, descending=True)[:, :k]
    taken, dropped = {}, 0
    for c in range(k):
        for t in range(probs.shape[0]):
            e = int(ranked[t, c])
            taken[e] = taken.get(e, 0) + 1
            dropped += taken[e] > capacity
    return dropped


@pytest.mark.parametrize("k,c", [(1, 1.0), (2, 0.5), (2, 0.8)])
def test_dropped_count_and_dropped_assignments_add_nothing(k, c) -> None:
    T, E = 40, 4
    layer = M.MoE(5, 8, E, top_k=k, capacity_factor=c, seed=2).to(F64)
    x = torch.randn(T, 5, dtype=F64, generator=torch.Generator().manual_seed(0))
    y = layer(x)
    probs = torch.softmax(x @ layer.router.weight.t(), dim=1)
    want = dropped_by_hand(probs, k, math.ceil(c * k * T / E))
    assert layer.dropped == want and want > 0  # the case must drop something
    assert int(layer.load.sum()) == k * T - want
    # a token whose every assignment was dropped gets exactly zero
    free = M.MoE(5, 8, E, top_k=k, capacity_factor=None, seed=2).to(F64)
    r = M.route(layer.router, x, k, c)
    gone = (~r.keep).all(dim=1)
    assert torch.equal(y[gone], torch.zeros_like(y[gone]))
    kept_all = r.keep.all(dim=1)  # untouched tokens equal the layer without capacity
    torch.testing.assert_close(y[kept_all], free(x)[kept_all], rtol=0, atol=1e-12)


def test_aux_loss_is_switch_eq_4() -> None:
    T, E, k = 50, 4, 2
    layer = M.MoE(3, 4, E, top_k=k, seed=0).to(F64)
    x = torch.randn(T, 3, dtype=F64, generator=torch.Generator().manual_seed(3))
    layer(x)
    probs = torch.softmax(x @ layer.router.weight.t(), dim=1)
    chosen = probs.topk(k, dim=1).indices.reshape(-1).tolist()
    f = [chosen.count(i) / (k * T) for i in range(E)]
    P = probs.mean(0).tolist()
    assert layer.aux_loss.item() == pytest.approx(E * sum(a * b for a, b in zip(f, P)))
    uniform = M.MoE(3, 4, E, seed=0).to(F64)
    with torch.no_grad():
        uniform.router.weight.zero_()  # p = 1/E for every token
    uniform(x)
    assert uniform.aux_loss.item() == pytest.approx(1.0)  # balanced: E · E · 1/E · 1/E


def test_gradients_reach_the_router_at_top_1() -> None:
    layer = M.MoE(4, 8, 3, top_k=1).to(F64)
    layer(torch.randn(9, 4, dtype=F64)).sum().backward()
    assert layer.router.weight.grad.abs().sum() > 1e-6  # Switch's gate, not Mixtral's 1


@pytest.mark.parametrize(
    "args,words",
    [((4, 0, None), "top-k must be 1 to 4"), ((4, 5, None), "top-k must be 1 to 4"),
     ((4, 1, -1.0), "capacity factor must be above 0"),
     ((0, 1, None), "num_experts must be at least 1")],
)  # fmt: skip
def test_impossible_routing_is_one_usage_error(args, words) -> None:
    E, k, c = args
    with pytest.raises(UsageError, match=words):
        M.MoE(4, 8, E, top_k=k, capacity_factor=c)
