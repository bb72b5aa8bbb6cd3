"""FlashAttention-2's backward as two Triton kernels: one program per tile of keys
(dK, dV), and one per tile of queries (dQ).

Dao, "FlashAttention-2" (2023), Algorithm 2: recompute P = exp(S - L) tile by tile
from the saved log-sum-exp, and use D = rowsum(dO ∘ O) (computed once, before the
kernels) for the softmax's Jacobian. The paper's loop adds every key tile's share into
every dQ_i (line 15), which on a GPU needs atomics; the second kernel loops the other
way round instead, so no two programs ever write the same rows.
"""

from __future__ import annotations

from snippets.attention.triton_support import jit, tl


# --8<-- [start:backward]
@jit
def flash_dkdv_kernel(
    Q,  # (B·H, N, D) contiguous, as are K, V, dO, dK and dV
    K,
    V,
    dO,
    L,  # (B·H, N) fp32, log2 units, from the forward
    Delta,  # (B·H, N) fp32: D = rowsum(dO ∘ O)
    dK,
    dV,
    N,
    D,
    qk_scale,  # 1/√d · log2(e)
    sm_scale,  # 1/√d
    CAUSAL: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_D: tl.constexpr,
    PRECISION: tl.constexpr,
):
    """One tile of keys (line 5): stream every query tile that sees it."""
    start_n, bh = tl.program_id(0), tl.program_id(1)
    offs_n = start_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_m = tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, BLOCK_D)
    base = bh.to(tl.int64) * N * D
    d_ok = offs_d[None, :] < D
    kv_mask = (offs_n[:, None] < N) & d_ok
    kv_offs = base + offs_n[:, None] * D + offs_d[None, :]
    k = tl.load(K + kv_offs, mask=kv_mask, other=0.0)  # line 6: (BLOCK_N, BLOCK_D)
    v = tl.load(V + kv_offs, mask=kv_mask, other=0.0)
    dk = tl.zeros([BLOCK_N, BLOCK_D], dtype=tl.float32)  # line 7
    dv = tl.zeros([BLOCK_N, BLOCK_D], dtype=tl.float32)
    # causal: earlier queries never look at these keys
    lo = start_n * BLOCK_N if CAUSAL else 0
    for start_m in range(lo, N, BLOCK_M):  # line 8
        rows = start_m + offs_m
        q_mask = (rows[:, None] < N) & d_ok
        q_offs = base + rows[:, None] * D + offs_d[None, :]
        q = tl.load(Q + q_offs, mask=q_mask, other=0.0)  # line 9: (BLOCK_M, BLOCK_D)
        do = tl.load(dO + q_offs, mask=q_mask, other=0.0)
        lse = tl.load(L + bh.to(tl.int64) * N + rows, mask=rows < N, other=0.0)
        delta = tl.load(Delta + bh.to(tl.int64) * N + rows, mask=rows < N, other=0.0)
        # line 10: S = Q_i K_jᵀ, (BLOCK_M, BLOCK_N)
        s = tl.dot(q, tl.trans(k), input_precision=PRECISION) * qk_scale
        valid = (rows[:, None] < N) & (offs_n[None, :] < N)
        if CAUSAL:
            valid = valid & (rows[:, None] >= offs_n[None, :])
        # line 11: P recomputed from L; nothing N×N was stored
        p = tl.where(valid, tl.exp2(s - lse[:, None]), 0.0)
        # line 12: dV_j += Pᵀ dO_i
        dv += tl.dot(tl.trans(p.to(do.dtype)), do, input_precision=PRECISION)
        dp = tl.dot(do, tl.trans(v), input_precision=PRECISION)  # line 13: dO Vᵀ
        ds = p * (dp - delta[:, None])  # line 14: dS = P ∘ (dP - D)
        # line 16: dK_j += dSᵀ Q_i (times 1/√d, once, below)
        dk += tl.dot(tl.trans(ds.to(q.dtype)), q, input_precision=PRECISION)
    # line 18: write dK_j, dV_j
    tl.store(dK + kv_offs, (dk * sm_scale).to(dK.dtype.element_ty), mask=kv_mask)
    tl.store(dV + kv_offs, dv.to(dV.dtype.element_ty), mask=kv_mask)


@jit
def flash_dq_kernel(
    Q,  # (B·H, N, D) contiguous, as are K, V, dO and dQ
    K,
    V,
    dO,
    L,  # (B·H, N) fp32, log2 units
    Delta,  # (B·H, N) fp32
    dQ,
    N,
    D,
    qk_scale,
    sm_scale,
    CAUSAL: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_D: tl.constexpr,
    PRECISION: tl.constexpr,
):
    """One tile of queries: stream the keys it sees and accumulate its own dQ_i =
    Σ_j dS K_j (line 15, without atomics)."""
    start_m, bh = tl.program_id(0), tl.program_id(1)
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    base = bh.to(tl.int64) * N * D
    d_ok = offs_d[None, :] < D
    q_mask = (offs_m[:, None] < N) & d_ok
    q_offs = base + offs_m[:, None] * D + offs_d[None, :]
    q = tl.load(Q + q_offs, mask=q_mask, other=0.0)  # (BLOCK_M, BLOCK_D)
    do = tl.load(dO + q_offs, mask=q_mask, other=0.0)
    lse = tl.load(L + bh.to(tl.int64) * N + offs_m, mask=offs_m < N, other=0.0)
    delta = tl.load(Delta + bh.to(tl.int64) * N + offs_m, mask=offs_m < N, other=0.0)
    dq = tl.zeros([BLOCK_M, BLOCK_D], dtype=tl.float32)
    hi = tl.minimum((start_m + 1) * BLOCK_M, N) if CAUSAL else N
    for start_n in range(0, hi, BLOCK_N):
        cols = start_n + offs_n
        kv_mask = (cols[:, None] < N) & d_ok
        kv_offs = base + cols[:, None] * D + offs_d[None, :]
        k = tl.load(K + kv_offs, mask=kv_mask, other=0.0)  # (BLOCK_N, BLOCK_D)
        v = tl.load(V + kv_offs, mask=kv_mask, other=0.0)
        s = tl.dot(q, tl.trans(k), input_precision=PRECISION) * qk_scale
        valid = (offs_m[:, None] < N) & (cols[None, :] < N)
        if CAUSAL:
            valid = valid & (offs_m[:, None] >= cols[None, :])
        p = tl.where(valid, tl.exp2(s - lse[:, None]), 0.0)  # line 11
        dp = tl.dot(do, tl.trans(v), input_precision=PRECISION)  # line 13
        ds = p * (dp - delta[:, None])  # line 14
        dq += tl.dot(ds.to(k.dtype), k, input_precision=PRECISION)  # line 15
    tl.store(dQ + q_offs, (dq * sm_scale).to(dQ.dtype.element_ty), mask=q_mask)


# --8<-- [end:backward]
