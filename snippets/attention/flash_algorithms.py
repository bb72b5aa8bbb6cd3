"""FlashAttention-2's two algorithms as tiled PyTorch loops (Dao 2023, Algorithms 1, 2).

Attention O = softmax(Q Kᵀ / √d) V, computed without ever holding the N×N score
matrix: the queries are cut into row blocks of ``block_q``, the keys and values into
column blocks of ``block_k``, and each query block streams over the key blocks keeping
the online-softmax state (running max m, running denominator ℓ) and an unnormalised
output. The forward returns only O and the log-sum-exp L = m + log ℓ (one number per
row); the backward recomputes each block of probabilities P = exp(S - L) from Q, K and
L instead of storing it.

Memory therefore grows with N (the inputs, O, L, and one block_q × block_k tile), not
N². The loops are the paper's; everything inside a tile is vectorised over batch B and
heads H, and large query blocks keep the matrix products big enough to be fast on a
CPU. ``flash_attention`` wraps both in an autograd function.
"""

from __future__ import annotations

import math

import torch

# Defaults: tiles big enough for fast matmuls, small enough for the cache.
BLOCK_Q, BLOCK_K = 256, 512


def _causal_mask(
    q_start: int, n_q: int, k_start: int, n_k: int, device: torch.device
) -> torch.Tensor | None:
    """True where key j is after query i (top-left aligned, as SDPA's is_causal); None
    if the tile has no masked entry."""
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
    acc = torch.promote_types(q.dtype, torch.float32)  # fp16/bf16 accumulate in fp32
    q, k, v = q.to(acc), k.to(acc), v.to(acc)
    O = torch.empty(B, H, N, d, dtype=acc, device=q.device)
    L = torch.empty(B, H, N, dtype=acc, device=q.device)
    # line 3: for each query block Q_i (in parallel across blocks on a GPU)
    for i in range(0, N, block_q):
        # folding the scale into Q_i saves a pass over S
        Qi = q[:, :, i : i + block_q] * scale  # (B, H, Br, d)
        br = Qi.shape[2]
        Oi = torch.zeros_like(Qi)  # line 5: O_i = 0, ℓ_i = 0, m_i = -inf
        li = torch.zeros_like(Qi[..., :1])  # (B, H, Br, 1)
        mi = torch.full_like(li, float("-inf"))
        # causal: key blocks wholly above the diagonal are all masked, skip them
        k_end = min(M, i + br) if causal else M
        for j in range(0, k_end, block_k):  # line 6
            Kj, Vj = k[:, :, j : j + block_k], v[:, :, j : j + block_k]  # (B, H, Bc, d)
            S = Qi @ Kj.transpose(-1, -2)  # line 8: S_ij = Q_i K_jᵀ, (B, H, Br, Bc)
            mask = _causal_mask(i, br, j, Kj.shape[2], q.device) if causal else None
            if mask is not None:
                S.masked_fill_(mask, float("-inf"))
            m_new = torch.maximum(mi, S.amax(-1, keepdim=True))  # line 9: running max
            P = torch.exp(S - m_new)  # line 9: P̃_ij, unnormalised, (B, H, Br, Bc)
            alpha = torch.exp(mi - m_new)  # rescales what the old max accumulated
            li = alpha * li + P.sum(-1, keepdim=True)  # line 9: ℓ_ij
            Oi = alpha * Oi + P @ Vj  # line 10: diag(e^{m_old - m_new}) O + P̃ V_j
            mi = m_new
        O[:, :, i : i + br] = Oi / li  # line 12: O_i = diag(ℓ_i)⁻¹ O_i
        L[:, :, i : i + br] = (mi + torch.log(li)).squeeze(-1)  # line 13: m + log ℓ
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
    """Algorithm 2 of FlashAttention-2: recompute P from L, never store it. fp32
    gradients (fp64 for fp64 inputs)."""
    B, H, N, d = q.shape
    M = k.shape[2]
    scale = 1 / math.sqrt(d) if scale is None else scale
    acc = torch.promote_types(q.dtype, torch.float32)
    q, k, v, dO = q.to(acc), k.to(acc), v.to(acc), dO.to(acc)
    D = (dO * O.to(acc)).sum(-1, keepdim=True)  # line 4: rowsum(dO ∘ O), (B, H, N, 1)
    dq = torch.zeros_like(q)
    dk, dv = torch.zeros_like(k), torch.zeros_like(v)
    # line 5: for each key/value block (in parallel on a GPU)
    for j in range(0, M, block_k):
        Kj, Vj = k[:, :, j : j + block_k], v[:, :, j : j + block_k]  # (B, H, Bc, d)
        bc = Kj.shape[2]
        dKj, dVj = torch.zeros_like(Kj), torch.zeros_like(Vj)  # line 7
        # line 8; causal: query rows before j see none of this block
        for i in range(j if causal else 0, N, block_q):
            Qi = q[:, :, i : i + block_q]  # (B, H, Br, d)
            dOi = dO[:, :, i : i + block_q]  # (B, H, Br, d)
            S = (Qi * scale) @ Kj.transpose(-1, -2)  # line 10, (B, H, Br, Bc)
            mask = _causal_mask(i, Qi.shape[2], j, bc, q.device) if causal else None
            if mask is not None:
                S.masked_fill_(mask, float("-inf"))
            # line 11: the exact probabilities, recomputed from L
            P = torch.exp(S - L[:, :, i : i + block_q, None])  # (B, H, Br, Bc)
            dVj += P.transpose(-1, -2) @ dOi  # line 12: dV_j += Pᵀ dO_i
            dP = dOi @ Vj.transpose(-1, -2)  # line 13, (B, H, Br, Bc)
            dS = P * (dP - D[:, :, i : i + block_q])  # line 14: softmax's Jacobian
            # line 15 (on a GPU this one is written to memory)
            dq[:, :, i : i + block_q] += (dS @ Kj) * scale
            dKj += (dS.transpose(-1, -2) @ Qi) * scale  # line 16
        dk[:, :, j : j + bc], dv[:, :, j : j + bc] = dKj, dVj  # line 18
    return dq, dk, dv


# --8<-- [end:backward]
