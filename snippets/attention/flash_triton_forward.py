"""FlashAttention-2's forward as a Triton kernel: one program per tile of queries.

Dao, "FlashAttention-2" (2023), Algorithm 1: a program keeps a running max m, a
running denominator ℓ and an unnormalised output for BLOCK_M query rows of one head
while it streams BLOCK_N keys and values past them, and saves only O and the
log-sum-exp L = m + log ℓ. The loop over query tiles (line 3 of the paper) is the
launch grid: (number of query tiles, B·H). Follows Triton's tutorial
``06-fused-attention.py`` but stays plain: no autotuning, no warp specialisation.
"""

from __future__ import annotations

from snippets.attention.triton_support import jit, tl


# --8<-- [start:forward]
@jit
def flash_forward_kernel(
    Q,  # (B·H, N, D) contiguous, as are K, V and O
    K,
    V,
    O,
    L,  # (B·H, N) fp32: the log-sum-exp, in log2 units
    N,
    D,
    qk_scale,  # 1/√d · log2(e): the kernel works in base 2
    CAUSAL: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_D: tl.constexpr,  # the next power of two ≥ D; the rest is masked
    PRECISION: tl.constexpr,
):
    # this program: one tile of queries (line 3) of one head
    start_m, bh = tl.program_id(0), tl.program_id(1)
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    base = bh.to(tl.int64) * N * D
    row_ok = offs_m[:, None] < N
    d_ok = offs_d[None, :] < D
    q_ptrs = Q + base + offs_m[:, None] * D + offs_d[None, :]
    q = tl.load(q_ptrs, mask=row_ok & d_ok, other=0.0)  # line 4: (BLOCK_M, BLOCK_D)

    # line 5: m_i = -inf (scaled scores, log2 units), ℓ_i = 0, O_i = 0 (unnormalised)
    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_D], dtype=tl.float32)
    # causal: keys past this tile's last query are never seen
    hi = tl.minimum((start_m + 1) * BLOCK_M, N) if CAUSAL else N
    for start_n in range(0, hi, BLOCK_N):  # line 6
        cols = start_n + offs_n
        kv_mask = (cols[:, None] < N) & d_ok
        kv_offs = base + cols[:, None] * D + offs_d[None, :]
        k = tl.load(K + kv_offs, mask=kv_mask, other=0.0)  # line 7: (BLOCK_N, BLOCK_D)
        v = tl.load(V + kv_offs, mask=kv_mask, other=0.0)  # (BLOCK_N, BLOCK_D)
        # line 8: S = Q_i K_jᵀ, (BLOCK_M, BLOCK_N), log2 units
        s = tl.dot(q, tl.trans(k), input_precision=PRECISION) * qk_scale
        valid = cols[None, :] < N
        if CAUSAL:
            valid = valid & (offs_m[:, None] >= cols[None, :])
        s = tl.where(valid, s, float("-inf"))
        # lines 9-10: rescale what we have by 2^(m_old - m_new). Column 0 is in the
        # first tile for every row, so m_new is finite from the first step on.
        m_new = tl.maximum(m_i, tl.max(s, 1))
        p = tl.exp2(s - m_new[:, None])  # (BLOCK_M, BLOCK_N)
        alpha = tl.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v, input_precision=PRECISION)
        m_i = m_new
    # line 12: normalise once, at the end (FA-2's saving over FA-1)
    acc = acc / l_i[:, None]
    out_ptrs = O + base + offs_m[:, None] * D + offs_d[None, :]
    tl.store(out_ptrs, acc.to(O.dtype.element_ty), mask=row_ok & d_ok)
    # line 13: L_i = m_i + log ℓ_i, in log2 units
    tl.store(L + bh.to(tl.int64) * N + offs_m, m_i + tl.log2(l_i), mask=offs_m < N)


# --8<-- [end:forward]
