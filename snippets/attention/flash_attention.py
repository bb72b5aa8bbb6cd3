"""FlashAttention-2, forward and backward, as tiled PyTorch (Dao 2023, Algorithms 1 and 2).

Attention O = softmax(Q Kᵀ / √d) V, computed without ever holding the N×N score matrix:
the queries are cut into row blocks of ``block_q``, the keys and values into column blocks of
``block_k``, and each query block streams over the key blocks keeping the online-softmax
state (running max m, running denominator ℓ) and an unnormalised output. The forward saves
only O and the log-sum-exp L = m + log ℓ (one number per row); the backward recomputes each
block of probabilities P = exp(S - L) from Q, K and L instead of storing it.

Memory therefore grows with N (the inputs, O, L, and one block_q × block_k tile), not N².
The loops are the paper's; everything inside a tile is vectorised over batch B and heads H,
and large query blocks keep the matrix products big enough to be fast on a CPU.

    python -m snippets.attention.flash_attention       # checks fp32 and bf16, causal and not, vs SDPA
"""

from __future__ import annotations

import argparse
import math

import torch
import torch.nn.functional as F

from snippets.core.cli import main_entry, positive_int
from snippets.core.runtime import Spec, print0

SPEC = Spec(
    summary="FlashAttention-2 forward and backward as tiled PyTorch, checked against SDPA"
)

MIN_HEAD_DIM, MAX_HEAD_DIM = (
    32,
    128,
)  # what the kernels (and the Triton version) support
BLOCK_Q, BLOCK_K = (
    256,
    512,
)  # defaults: tiles big enough for fast matmuls, small enough for the cache


def check_inputs(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
    """One clear ValueError/TypeError for each way the inputs can be wrong."""
    for name, t in (("q", q), ("k", k), ("v", v)):
        if t.dim() != 4:
            raise ValueError(
                f"{name} must have shape (B, H, N, d), got {tuple(t.shape)}"
            )
    if not q.is_floating_point() or q.dtype != k.dtype or q.dtype != v.dtype:
        raise TypeError(
            f"q, k, v must share one floating dtype, got {q.dtype}, {k.dtype}, {v.dtype}"
        )
    if not (q.device == k.device == v.device):
        raise ValueError(
            f"q, k, v must be on one device, got {q.device}, {k.device}, {v.device}"
        )
    if k.shape != v.shape:
        raise ValueError(
            f"k and v must have the same shape, got {tuple(k.shape)} and {tuple(v.shape)}"
        )
    if q.shape[:2] != k.shape[:2] or q.shape[3] != k.shape[3]:
        raise ValueError(
            f"q {tuple(q.shape)} and k {tuple(k.shape)} must agree on B, H and d (N may differ)"
        )
    d = q.shape[3]
    if not MIN_HEAD_DIM <= d <= MAX_HEAD_DIM or d % 8:
        raise ValueError(
            f"head dim d={d} is not supported: use a multiple of 8 from {MIN_HEAD_DIM} to {MAX_HEAD_DIM}"
        )
    if q.shape[2] == 0 or k.shape[2] == 0:
        raise ValueError("sequence lengths must be at least 1")


def _causal_mask(
    q_start: int, n_q: int, k_start: int, n_k: int, device: torch.device
) -> torch.Tensor | None:
    """True where key j is after query i (top-left aligned, as SDPA's is_causal); None if the
    tile has no masked entry."""
    if k_start + n_k - 1 <= q_start:
        return None
    rows = torch.arange(q_start, q_start + n_q, device=device)[:, None]
    cols = torch.arange(k_start, k_start + n_k, device=device)[None, :]
    return cols > rows  # (n_q, n_k)


# --8<-- [start:forward]
def flash_forward(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    causal: bool = False,
    scale: float | None = None,
    block_q: int = BLOCK_Q,
    block_k: int = BLOCK_K,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Algorithm 1 of FlashAttention-2. Returns O (B, H, N, d) and L (B, H, N), in fp32
    (fp64 for fp64 inputs)."""
    B, H, N, d = q.shape
    M = k.shape[2]
    scale = 1 / math.sqrt(d) if scale is None else scale
    acc = torch.promote_types(
        q.dtype, torch.float32
    )  # fp16/bf16 accumulate in fp32 (fp64 stays)
    q, k, v = q.to(acc), k.to(acc), v.to(acc)
    O = torch.empty(B, H, N, d, dtype=acc, device=q.device)
    L = torch.empty(B, H, N, dtype=acc, device=q.device)
    for i in range(
        0, N, block_q
    ):  # line 3: for each query block Q_i (parallel across blocks on a GPU)
        Qi = (
            q[:, :, i : i + block_q] * scale
        )  # (B, H, Br, d); folding the scale in here saves a pass over S
        br = Qi.shape[2]
        Oi = torch.zeros_like(Qi)  # line 5: O_i = 0, ℓ_i = 0, m_i = -inf
        li = torch.zeros_like(Qi[..., :1])  # (B, H, Br, 1)
        mi = torch.full_like(li, float("-inf"))
        k_end = (
            min(M, i + br) if causal else M
        )  # blocks wholly above the diagonal are all masked: skip
        for j in range(0, k_end, block_k):  # line 6
            Kj, Vj = k[:, :, j : j + block_k], v[:, :, j : j + block_k]  # (B, H, Bc, d)
            S = Qi @ Kj.transpose(-1, -2)  # line 8: S_ij = Q_i K_jᵀ, (B, H, Br, Bc)
            if (
                causal
                and (mask := _causal_mask(i, br, j, Kj.shape[2], q.device)) is not None
            ):
                S.masked_fill_(mask, float("-inf"))
            m_new = torch.maximum(mi, S.amax(-1, keepdim=True))  # line 9: running max
            P = torch.exp(S - m_new)  # line 9: P̃_ij, unnormalised
            alpha = torch.exp(
                mi - m_new
            )  # rescales what was accumulated under the old max
            li = alpha * li + P.sum(-1, keepdim=True)  # line 9: ℓ_ij
            Oi = (
                alpha * Oi + P @ Vj
            )  # line 10: O_ij = diag(e^{m_old - m_new}) O + P̃ V_j
            mi = m_new
        O[:, :, i : i + br] = Oi / li  # line 12: O_i = diag(ℓ_i)⁻¹ O_i
        L[:, :, i : i + br] = (mi + torch.log(li)).squeeze(
            -1
        )  # line 13: L_i = m_i + log ℓ_i
    return O, L


# --8<-- [end:forward]


# --8<-- [start:backward]
def flash_backward(
    dO: torch.Tensor,
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    O: torch.Tensor,
    L: torch.Tensor,
    causal: bool = False,
    scale: float | None = None,
    block_q: int = BLOCK_Q,
    block_k: int = BLOCK_K,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Algorithm 2 of FlashAttention-2: recompute P from L, never store it. fp32 gradients
    (fp64 for fp64 inputs)."""
    B, H, N, d = q.shape
    M = k.shape[2]
    scale = 1 / math.sqrt(d) if scale is None else scale
    acc = torch.promote_types(q.dtype, torch.float32)
    q, k, v, dO = q.to(acc), k.to(acc), v.to(acc), dO.to(acc)
    D = (dO * O.to(acc)).sum(
        -1, keepdim=True
    )  # line 4: D = rowsum(dO ∘ O), (B, H, N, 1)
    dq = torch.zeros_like(q)
    dk, dv = torch.zeros_like(k), torch.zeros_like(v)
    for j in range(
        0, M, block_k
    ):  # line 5: for each key/value block (parallel on a GPU)
        Kj, Vj = k[:, :, j : j + block_k], v[:, :, j : j + block_k]  # (B, H, Bc, d)
        bc = Kj.shape[2]
        dKj, dVj = torch.zeros_like(Kj), torch.zeros_like(Vj)  # line 7
        for i in range(
            j if causal else 0, N, block_q
        ):  # line 8; above the diagonal: all masked
            Qi, dOi = (
                q[:, :, i : i + block_q],
                dO[:, :, i : i + block_q],
            )  # (B, H, Br, d)
            S = (Qi * scale) @ Kj.transpose(-1, -2)  # line 10, (B, H, Br, Bc)
            if (
                causal
                and (mask := _causal_mask(i, Qi.shape[2], j, bc, q.device)) is not None
            ):
                S.masked_fill_(mask, float("-inf"))
            P = torch.exp(
                S - L[:, :, i : i + block_q, None]
            )  # line 11: exact probabilities, recomputed
            dVj += P.transpose(-1, -2) @ dOi  # line 12: dV_j += Pᵀ dO_i
            dP = dOi @ Vj.transpose(-1, -2)  # line 13, (B, H, Br, Bc)
            dS = P * (
                dP - D[:, :, i : i + block_q]
            )  # line 14: softmax's Jacobian, via D
            dq[:, :, i : i + block_q] += (
                dS @ Kj
            ) * scale  # line 15 (written to memory on a GPU)
            dKj += (dS.transpose(-1, -2) @ Qi) * scale  # line 16
        dk[:, :, j : j + bc], dv[:, :, j : j + bc] = dKj, dVj  # line 18
    return dq, dk, dv


# --8<-- [end:backward]


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
    """Like F.scaled_dot_product_attention(q, k, v, is_causal=causal): (B, H, N, d) in and out,
    differentiable. Any N; d a multiple of 8 from 32 to 128."""
    check_inputs(q, k, v)
    if block_q < 1 or block_k < 1:
        raise ValueError(
            f"block sizes must be positive, got block_q={block_q}, block_k={block_k}"
        )
    return FlashAttention.apply(q, k, v, causal, scale, block_q, block_k)


# --8<-- [end:autograd]


def head_dim(text: str) -> int:
    d = int(text)
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
        "--block-q",
        type=positive_int,
        default=128,
        help="query rows per tile (default 128)",
    )
    parser.add_argument(
        "--block-k",
        type=positive_int,
        default=96,
        help="key rows per tile (default 96)",
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
            assert max(errs) <= tol, (
                f"{dtype} causal={causal}: max errors {errs} exceed {tol}"
            )
            rows.append(
                {
                    "dtype": str(dtype).removeprefix("torch."),
                    "causal": causal,
                    "O": errs[0],
                    "dQ": errs[1],
                    "dK": errs[2],
                    "dV": errs[3],
                }
            )
    print0(
        f"tiled FlashAttention-2 vs F.scaled_dot_product_attention, B=2 H=3 N={N} d={d}, "
        f"tiles {block_q}×{block_k}, max |error|:"
    )
    for r in rows:
        print0(
            f"  {r['dtype']:<9} causal={r['causal']!s:<5}  O {r['O']:.1e}  dQ {r['dQ']:.1e}  "
            f"dK {r['dK']:.1e}  dV {r['dV']:.1e}"
        )
    return {"tables": {"errors": rows}}


if __name__ == "__main__":
    raise SystemExit(main_entry(main, SPEC))
