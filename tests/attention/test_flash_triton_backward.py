"""The two backward kernels alone, fed a log-sum-exp and D = rowsum(dO ∘ O) computed
by torch (not by the forward kernel), against torch autograd of plain attention."""

from __future__ import annotations

import math

import pytest
import torch

import snippets  # noqa: F401  (sets TRITON_INTERPRET=1 before Triton loads)
from snippets.attention import triton_support as ts

pytestmark = pytest.mark.skipif(
    not (ts.INTERPRETED or (ts.HAVE_TRITON and torch.cuda.is_available())),
    reason="needs Triton (interpreted on a CPU, or compiled with CUDA)",
)
DEVICE = "cpu" if ts.INTERPRETED else "cuda"


def _mask(s, causal):
    if not causal:
        return s
    n = s.shape[-1]
    upper = torch.ones(n, n, dtype=torch.bool, device=s.device).triu(1)
    return s.masked_fill(upper, float("-inf"))


def _autograd_reference(q, k, v, do, causal):
    """O and (dQ, dK, dV) of softmax(q kᵀ/√d) v by torch autograd, float64."""
    ins = [t.detach().double().cpu().requires_grad_() for t in (q, k, v)]
    s = _mask(ins[0] @ ins[1].transpose(-1, -2) / math.sqrt(q.shape[-1]), causal)
    out = torch.softmax(s, -1) @ ins[2]
    grads = torch.autograd.grad(out, ins, do.double().cpu())
    return out.detach(), torch.logsumexp(s.detach(), -1), grads


def _run_backward(q, k, v, do, causal):
    from snippets.attention.flash_triton_backward import (
        flash_dkdv_kernel,
        flash_dq_kernel,
    )

    bh, n, d = q.shape
    out, lse_e, _ = _autograd_reference(q, k, v, do, causal)
    lse = (lse_e / math.log(2)).float().to(DEVICE)  # log2 units, as the kernels read
    delta = (do.double().cpu() * out).sum(-1).float().to(DEVICE)
    dq, dk, dv = (torch.empty_like(t) for t in (q, k, v))
    sm = 1.0 / math.sqrt(d)
    cfg = dict(
        CAUSAL=causal,
        BLOCK_M=16,
        BLOCK_N=16,
        BLOCK_D=max(16, ts.triton.next_power_of_2(d)),
        PRECISION="ieee" if q.dtype == torch.float32 else "tf32",
    )
    grid = (ts.triton.cdiv(n, 16), bh)
    flash_dkdv_kernel[grid](
        q, k, v, do, lse, delta, dk, dv, n, d, sm * ts.LOG2E, sm, **cfg
    )
    flash_dq_kernel[grid](q, k, v, do, lse, delta, dq, n, d, sm * ts.LOG2E, sm, **cfg)
    return dq, dk, dv


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("n,d", [(19, 24), (33, 16)])
def test_gradients_match_autograd(n, d, causal):
    gen = torch.Generator().manual_seed(n + d)
    q, k, v, do = (torch.randn(2, n, d, generator=gen).to(DEVICE) for _ in range(4))
    got = _run_backward(q, k, v, do, causal)
    _, _, want = _autograd_reference(q, k, v, do, causal)
    for name, g, w in zip(("dq", "dk", "dv"), got, want):
        err = (g.double().cpu() - w).abs().max().item()
        assert err <= 5e-5 * max(1.0, w.abs().max().item()), f"{name}: {err:.2e}"


def test_causal_last_key_gets_only_the_last_querys_gradient():
    """Causal: only query N-1 sees key N-1, so dV[N-1] = Σ_i P[i, N-1] dO[i] has one
    term, P[N-1, N-1] · dO[N-1], worked by hand below."""
    n, d = 9, 16
    gen = torch.Generator().manual_seed(3)
    q, k, v, do = (torch.randn(1, n, d, generator=gen).to(DEVICE) for _ in range(4))
    _, dk, dv = _run_backward(q, k, v, do, causal=True)
    s_last = (q[0, -1] @ k[0].T) / math.sqrt(d)  # the last query's scores, (n,)
    p_last = torch.softmax(s_last, -1)[-1]
    torch.testing.assert_close(dv[0, -1], p_last * do[0, -1], atol=1e-5, rtol=1e-5)
    assert dk.isfinite().all()


def test_fp16_gradients_are_close():
    gen = torch.Generator().manual_seed(11)
    q, k, v, do = (
        torch.randn(1, 21, 32, generator=gen).to(DEVICE, torch.float16)
        for _ in range(4)
    )
    got = _run_backward(q, k, v, do, causal=False)
    _, _, want = _autograd_reference(q, k, v, do, causal=False)
    for g, w in zip(got, want):
        assert g.dtype == torch.float16
        assert (g.double().cpu() - w).abs().max().item() < 2e-2
