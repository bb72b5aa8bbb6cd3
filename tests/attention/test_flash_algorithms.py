"""Algorithms 1 and 2 called directly: the log-sum-exp the forward saves, and the
backward's gradients against autograd through plain fp64 attention."""

from __future__ import annotations

import pytest
import torch

from snippets.attention import flash_algorithms as fl


def _attention64(q, k, v, causal):
    s = (q @ k.transpose(-1, -2)) / q.shape[-1] ** 0.5  # (B, H, N, M)
    if causal:
        above = torch.ones(s.shape[-2:], dtype=torch.bool).triu(1)
        s = s.masked_fill(above, float("-inf"))
    return s, torch.softmax(s, -1) @ v


def test_lse_is_logsumexp_of_scores() -> None:
    g = torch.Generator().manual_seed(5)
    q, k, v = (torch.randn(1, 3, 45, 32, generator=g) for _ in range(3))
    O, L = fl.flash_forward(q, k, v, causal=True, block_q=16, block_k=8)
    s, ref = _attention64(q, k, v, causal=True)
    torch.testing.assert_close(L, torch.logsumexp(s, -1))
    torch.testing.assert_close(O, ref)


@pytest.mark.parametrize("causal", [False, True])
def test_backward_from_saved_output_and_lse(causal: bool) -> None:
    """Given only O and L, Algorithm 2 gives autograd's gradients, to fp64 rounding."""
    g = torch.Generator().manual_seed(6)
    q, k, v, dO = (torch.randn(2, 1, 53, 40, generator=g).double() for _ in range(4))
    O, L = fl.flash_forward(q, k, v, causal, block_q=16, block_k=24)
    dq, dk, dv = fl.flash_backward(dO, q, k, v, O, L, causal, block_q=16, block_k=24)
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    _, ref = _attention64(*leaves, causal)
    for got, want in zip((dq, dk, dv), torch.autograd.grad(ref, leaves, dO)):
        torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-10)


def test_causal_mask_is_none_below_the_diagonal() -> None:
    assert fl._causal_mask(64, 16, 0, 32, torch.device("cpu")) is None
    mask = fl._causal_mask(0, 3, 0, 4, torch.device("cpu"))
    assert mask.tolist() == [[j > i for j in range(4)] for i in range(3)]
