"""FlashAttention-2 forward and backward as tiled PyTorch, differentiable like SDPA.

``flash_attention(q, k, v, causal)`` takes ``(B, H, N, d)`` tensors as
``F.scaled_dot_product_attention`` does. Its autograd function runs the paper's
Algorithm 1 forward and Algorithm 2 backward (``flash_algorithms``) and saves only
q, k, v, O and the log-sum-exp L: O(N·d) memory, never the N×N probabilities.

Bad input gets one clear error each: a shape that is not (B, H, N, d), q and k that
disagree on B, H or d, k and v of different shapes, mixed dtypes or devices, a head
dim outside 32-128 or not a multiple of 8, an empty sequence, a block size below 1.

    python -m snippets run flash_attention   # fp32 and bf16, causal and not, vs SDPA
"""

from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F

from snippets.attention.flash_algorithms import (
    BLOCK_K,
    BLOCK_Q,
    flash_backward,
    flash_forward,
)
from snippets.core.claims import law
from snippets.core.cli import main_entry, positive_int
from snippets.core.runtime import Spec, print0

SPEC = Spec(
    summary="FlashAttention-2 forward and backward as tiled PyTorch, checked vs SDPA"
)

# What the kernels (and the Triton version) are written for.
MIN_HEAD_DIM, MAX_HEAD_DIM = 32, 128


def check_inputs(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
    """One clear ValueError/TypeError for each way the inputs can be wrong."""
    for name, t in (("q", q), ("k", k), ("v", v)):
        if t.dim() != 4:
            raise ValueError(
                f"{name} must have shape (B, H, N, d), got {tuple(t.shape)}"
            )
    if not q.is_floating_point() or q.dtype != k.dtype or q.dtype != v.dtype:
        raise TypeError(
            "q, k, v must share one floating dtype, "
            f"got {q.dtype}, {k.dtype}, {v.dtype}"
        )
    if not (q.device == k.device == v.device):
        raise ValueError(
            f"q, k, v must be on one device, got {q.device}, {k.device}, {v.device}"
        )
    if k.shape != v.shape:
        raise ValueError(
            "k and v must have the same shape, "
            f"got {tuple(k.shape)} and {tuple(v.shape)}"
        )
    if q.shape[:2] != k.shape[:2] or q.shape[3] != k.shape[3]:
        raise ValueError(
            f"q {tuple(q.shape)} and k {tuple(k.shape)} must agree on B, H and d "
            "(N may differ)"
        )
    d = q.shape[3]
    if not MIN_HEAD_DIM <= d <= MAX_HEAD_DIM or d % 8:
        raise ValueError(
            f"head dim d={d} is not supported: use a multiple of 8 "
            f"from {MIN_HEAD_DIM} to {MAX_HEAD_DIM}"
        )
    if q.shape[2] == 0 or k.shape[2] == 0:
        raise ValueError("sequence lengths must be at least 1")


# --8<-- [start:autograd]
class FlashAttention(torch.autograd.Function):
    """Saves q, k, v, O and L only: O(N·d) memory, never the N×N probabilities."""

    @staticmethod
    def forward(ctx, q, k, v, causal, scale, block_q, block_k):
        O, L = flash_forward(q, k, v, causal, scale, block_q, block_k)
        O = O.to(q.dtype)
        ctx.save_for_backward(q, k, v, O, L)
        ctx.args = (causal, scale, block_q, block_k)
        return O

    @staticmethod
    def backward(ctx, dO):
        q, k, v, O, L = ctx.saved_tensors
        dq, dk, dv = flash_backward(dO, q, k, v, O, L, *ctx.args)
        return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype), None, None, None, None


def flash_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    causal: bool = False,
    *,
    scale: float | None = None,
    block_q: int = BLOCK_Q,
    block_k: int = BLOCK_K,
) -> torch.Tensor:
    """Like F.scaled_dot_product_attention(q, k, v, is_causal=causal): (B, H, N, d)
    in and out, differentiable. Any N; d a multiple of 8 from 32 to 128."""
    check_inputs(q, k, v)
    if block_q < 1 or block_k < 1:
        raise ValueError(
            f"block sizes must be positive, got block_q={block_q}, block_k={block_k}"
        )
    return FlashAttention.apply(q, k, v, causal, scale, block_q, block_k)


# --8<-- [end:autograd]


def head_dim(text: str) -> int:
    """An argparse ``type=`` for d: a multiple of 8 from 32 to 128."""
    d = positive_int(text)
    if not MIN_HEAD_DIM <= d <= MAX_HEAD_DIM or d % 8:
        raise argparse.ArgumentTypeError(
            f"use a multiple of 8 from {MIN_HEAD_DIM} to {MAX_HEAD_DIM}, got {d}"
        )
    return d


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--seq-len",
        type=positive_int,
        default=300,
        help="N (default 300: two tiles and a ragged one)",
    )
    parser.add_argument(
        "--head-dim",
        type=head_dim,
        default=64,
        help="d, a multiple of 8 from 32 to 128 (default 64)",
    )
    parser.add_argument(
        "--block-q", type=positive_int, default=128, help="query rows per tile"
    )
    parser.add_argument(
        "--block-k", type=positive_int, default=96, help="key rows per tile"
    )


def main(
    seq_len: int = 300, head_dim: int = 64, block_q: int = 128, block_k: int = 96
) -> dict:
    torch.manual_seed(0)
    rows = []
    N, d = seq_len, head_dim
    for dtype, tol in ((torch.float32, 1e-4), (torch.bfloat16, 5e-2)):
        for causal in (False, True):
            q, k, v = (
                torch.randn(2, 3, N, d, dtype=dtype, requires_grad=True)
                for _ in range(3)
            )
            dO = torch.randn(2, 3, N, d, dtype=dtype)
            ours = flash_attention(q, k, v, causal, block_q=block_q, block_k=block_k)
            grads = torch.autograd.grad(ours, (q, k, v), dO)
            # The oracle: PyTorch's own attention, in fp32 even for bf16 inputs.
            q32, k32, v32 = (t.detach().float().requires_grad_() for t in (q, k, v))
            ref = F.scaled_dot_product_attention(q32, k32, v32, is_causal=causal)
            ref_grads = torch.autograd.grad(ref, (q32, k32, v32), dO.float())
            errs = [(ours.float() - ref).abs().max().item()]
            errs += [
                (g.float() - r).abs().max().item() for g, r in zip(grads, ref_grads)
            ]
            law(
                max(errs) <= tol,
                f"{dtype} causal={causal}: max errors {errs} exceed {tol}",
            )
            dtype_name = str(dtype).removeprefix("torch.")
            rows.append(
                {"dtype": dtype_name, "causal": causal}
                | dict(zip(("O", "dQ", "dK", "dV"), errs))
            )
    print0("tiled FlashAttention-2 vs F.scaled_dot_product_attention, max |error|")
    print0(f"B=2 H=3 N={N} d={d}, tiles {block_q}×{block_k}:")
    for r in rows:
        print0(
            f"  {r['dtype']:<9} causal={r['causal']!s:<5}  O {r['O']:.1e}  "
            f"dQ {r['dQ']:.1e}  dK {r['dK']:.1e}  dV {r['dV']:.1e}"
        )
    return {"tables": {"errors": rows}}


if __name__ == "__main__":
    raise SystemExit(main_entry(main, SPEC))
