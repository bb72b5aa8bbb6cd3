"""The forward kernel alone, launched by hand on tiny odd shapes, against softmax
attention written out in float64: the output O and the saved log-sum-exp L (log2)."""

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


def _run_forward(q, k, v, causal):
    from snippets.attention.flash_triton_forward import flash_forward_kernel

    bh, n, d = q.shape
    o = torch.empty_like(q)
    lse = torch.empty(bh, n, dtype=torch.float32, device=q.device)
    block_d = max(16, ts.triton.next_power_of_2(d))
    grid = (ts.triton.cdiv(n, 16), bh)
    flash_forward_kernel[grid](
        q, k, v, o, lse, n, d, ts.LOG2E / math.sqrt(d), CAUSAL=causal,
        BLOCK_M=16, BLOCK_N=16, BLOCK_D=block_d,
        PRECISION="ieee" if q.dtype == torch.float32 else "tf32",
    )  # fmt: skip
    return o, lse


def _oracle(q, k, v, causal):
    """softmax(q kᵀ/√d) v and the natural log-sum-exp of each score row, float64."""
    q, k, v = (t.double().cpu() for t in (q, k, v))
    s = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    if causal:
        n = s.shape[-1]
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
    return torch.softmax(s, -1) @ v, torch.logsumexp(s, -1)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("n,d", [(19, 24), (5, 16), (33, 32)])
def test_output_and_log2_lse_match_softmax_attention(n, d, causal):
    gen = torch.Generator().manual_seed(n * d)
    q, k, v = (torch.randn(3, n, d, generator=gen).to(DEVICE) for _ in range(3))
    o, lse = _run_forward(q, k, v, causal)
    want_o, want_lse = _oracle(q, k, v, causal)
    torch.testing.assert_close(o.double().cpu(), want_o, atol=2e-5, rtol=2e-5)
    # L is saved in log2 units: log2 Σ e^s = (ln Σ e^s) / ln 2
    torch.testing.assert_close(
        lse.double().cpu(), want_lse / math.log(2), atol=2e-5, rtol=2e-5
    )


def test_causal_first_row_copies_the_first_value():
    """Query 0 sees only key 0, so O[0] = V[0] and L[0] = s_00 · log2 e exactly."""
    q = torch.randn(1, 7, 16, device=DEVICE)
    k = torch.randn(1, 7, 16, device=DEVICE)
    v = torch.arange(7 * 16, dtype=torch.float32, device=DEVICE).reshape(1, 7, 16)
    o, lse = _run_forward(q, k, v, causal=True)
    torch.testing.assert_close(o[0, 0], v[0, 0])
    s00 = (q[0, 0] @ k[0, 0]).item() / 4.0  # √16 = 4
    assert lse[0, 0].item() == pytest.approx(s00 / math.log(2), abs=1e-5)


def test_fp16_matches_float64_reference():
    gen = torch.Generator().manual_seed(7)
    q, k, v = (
        torch.randn(2, 21, 32, generator=gen).to(DEVICE, torch.float16)
        for _ in range(3)
    )
    o, _ = _run_forward(q, k, v, causal=False)
    assert o.dtype == torch.float16
    want, _ = _oracle(q, k, v, causal=False)
    assert (o.double().cpu() - want).abs().max().item() < 1e-2
