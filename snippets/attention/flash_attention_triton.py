"""FlashAttention-2 as Triton kernels: the tiled algorithm of ``flash_attention.py``, one
program per tile of queries (forward, dQ) or of keys (dK, dV).

Dao, "FlashAttention-2" (2023): the forward keeps a running max m, a running denominator ℓ
and an unnormalised output for a block of BLOCK_M query rows while it streams BLOCK_N keys
and values past them (Algorithm 1); it saves only O and the log-sum-exp L = m + log ℓ. The
backward recomputes P = exp(S - L) tile by tile (Algorithm 2) with D = rowsum(dO ∘ O).
This file follows Triton's own tutorial ``06-fused-attention.py`` but stays plain: no
autotuning, no warp specialisation, one kernel per job.

Same interface as ``flash_attention``: ``(B, H, N, d)`` tensors, ``causal`` flag, any N (the
tiles past the end are masked), head dims 16–128 (the head dim is padded to a power of two
inside the kernel and masked).

Where it runs:

* On a CUDA GPU: compiled kernels (fp16, bf16, fp32; fp32 matmuls in IEEE precision).
* Without a GPU: Triton's interpreter runs the same kernels with NumPy on the CPU. It must
  be chosen (``TRITON_INTERPRET=1``) before Triton is first imported (its own ``tl``
  helpers are jitted then, and torch may import it early), so the ``snippets`` package
  sets it on import when there is no GPU. The interpreter handles fp32 and fp16, not bf16.
* Without Triton installed: the module still imports; calling the kernels says how to
  install it (``pip install -e '.[triton]'``).

    python -m snippets.attention.flash_attention_triton
"""

from __future__ import annotations

import math
import os

import torch
import torch.nn.functional as F

from snippets.core.cli import main_entry
from snippets.core.runtime import Spec, print0

SPEC = Spec(
    summary="FlashAttention-2 forward and backward as Triton kernels, checked against SDPA"
)

try:
    import triton
    import triton.language as tl
except (
    ImportError
):  # an optional extra: everything below that needs it checks HAVE_TRITON
    triton = tl = None
HAVE_TRITON = triton is not None
INTERPRETED = HAVE_TRITON and os.environ.get("TRITON_INTERPRET") == "1"
LOG2E = 1.4426950408889634  # the kernels use exp2: e^x = 2^(x·log2 e)


def _jit(fn):
    return triton.jit(fn) if HAVE_TRITON else fn


# --8<-- [start:forward]
@_jit
def _fwd_kernel(
    Q,
    K,
    V,
    O,
    L,
    N,
    D,
    qk_scale,  # Q, K, V, O: (B·H, N, D) contiguous; L: (B·H, N) fp32
    CAUSAL: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_D: tl.constexpr,
    PRECISION: tl.constexpr,
):
    start_m, bh = (
        tl.program_id(0),
        tl.program_id(1),
    )  # this program: one tile of queries of one head
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(
        0, BLOCK_D
    )  # BLOCK_D = next power of two ≥ D; the rest is masked
    base = bh.to(tl.int64) * N * D
    row_ok = offs_m[:, None] < N
    d_ok = offs_d[None, :] < D
    q = tl.load(
        Q + base + offs_m[:, None] * D + offs_d[None, :], mask=row_ok & d_ok, other=0.0
    )  # (BLOCK_M, BLOCK_D)

    m_i = tl.full(
        [BLOCK_M], float("-inf"), dtype=tl.float32
    )  # running max of the scaled scores (log2 units)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)  # running denominator ℓ
    acc = tl.zeros([BLOCK_M, BLOCK_D], dtype=tl.float32)  # unnormalised output
    hi = (
        tl.minimum((start_m + 1) * BLOCK_M, N) if CAUSAL else N
    )  # causal: keys past the last query are never seen
    for start_n in range(0, hi, BLOCK_N):
        cols = start_n + offs_n
        kv_mask = (cols[:, None] < N) & d_ok
        k = tl.load(
            K + base + cols[:, None] * D + offs_d[None, :], mask=kv_mask, other=0.0
        )  # (BLOCK_N, BLOCK_D)
        v = tl.load(
            V + base + cols[:, None] * D + offs_d[None, :], mask=kv_mask, other=0.0
        )  # (BLOCK_N, BLOCK_D)
        s = (
            tl.dot(q, tl.trans(k), input_precision=PRECISION) * qk_scale
        )  # (BLOCK_M, BLOCK_N), log2 units
        valid = cols[None, :] < N
        if CAUSAL:
            valid = valid & (offs_m[:, None] >= cols[None, :])
        s = tl.where(valid, s, float("-inf"))
        # Online softmax (FA-2 Algorithm 1, lines 8-10): rescale what we have by 2^(m_old - m_new).
        # Column 0 is in the first tile for every row, so m_new is finite from the first step on.
        m_new = tl.maximum(m_i, tl.max(s, 1))
        p = tl.exp2(s - m_new[:, None])  # (BLOCK_M, BLOCK_N)
        alpha = tl.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v, input_precision=PRECISION)
        m_i = m_new
    acc = acc / l_i[:, None]  # normalise once, at the end (FA-2's saving over FA-1)
    tl.store(
        O + base + offs_m[:, None] * D + offs_d[None, :],
        acc.to(O.dtype.element_ty),
        mask=row_ok & d_ok,
    )
    tl.store(
        L + bh.to(tl.int64) * N + offs_m, m_i + tl.log2(l_i), mask=offs_m < N
    )  # log-sum-exp, log2 units


# --8<-- [end:forward]


# --8<-- [start:backward]
@_jit
def _bwd_dkdv_kernel(
    Q,
    K,
    V,
    dO,
    L,
    Delta,
    dK,
    dV,
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
    """One tile of keys: stream every query tile that sees it and accumulate dK, dV
    (FA-2 Algorithm 2, the outer loop over key blocks)."""
    start_n, bh = tl.program_id(0), tl.program_id(1)
    offs_n = start_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_m = tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, BLOCK_D)
    base = bh.to(tl.int64) * N * D
    d_ok = offs_d[None, :] < D
    kv_mask = (offs_n[:, None] < N) & d_ok
    k = tl.load(
        K + base + offs_n[:, None] * D + offs_d[None, :], mask=kv_mask, other=0.0
    )  # (BLOCK_N, BLOCK_D)
    v = tl.load(
        V + base + offs_n[:, None] * D + offs_d[None, :], mask=kv_mask, other=0.0
    )  # (BLOCK_N, BLOCK_D)
    dk = tl.zeros([BLOCK_N, BLOCK_D], dtype=tl.float32)
    dv = tl.zeros([BLOCK_N, BLOCK_D], dtype=tl.float32)
    lo = (
        start_n * BLOCK_N if CAUSAL else 0
    )  # causal: earlier queries never look at these keys
    for start_m in range(lo, N, BLOCK_M):
        rows = start_m + offs_m
        q_mask = (rows[:, None] < N) & d_ok
        q = tl.load(
            Q + base + rows[:, None] * D + offs_d[None, :], mask=q_mask, other=0.0
        )  # (BLOCK_M, BLOCK_D)
        do = tl.load(
            dO + base + rows[:, None] * D + offs_d[None, :], mask=q_mask, other=0.0
        )  # (BLOCK_M, BLOCK_D)
        lse = tl.load(
            L + bh.to(tl.int64) * N + rows, mask=rows < N, other=0.0
        )  # (BLOCK_M,)
        delta = tl.load(
            Delta + bh.to(tl.int64) * N + rows, mask=rows < N, other=0.0
        )  # (BLOCK_M,)
        s = (
            tl.dot(q, tl.trans(k), input_precision=PRECISION) * qk_scale
        )  # (BLOCK_M, BLOCK_N)
        valid = (rows[:, None] < N) & (offs_n[None, :] < N)
        if CAUSAL:
            valid = valid & (rows[:, None] >= offs_n[None, :])
        p = tl.where(
            valid, tl.exp2(s - lse[:, None]), 0.0
        )  # P recomputed from L: nothing N×N was stored
        dv += tl.dot(
            tl.trans(p.to(do.dtype)), do, input_precision=PRECISION
        )  # dV = Pᵀ dO
        dp = tl.dot(do, tl.trans(v), input_precision=PRECISION)  # dP = dO Vᵀ
        ds = p * (dp - delta[:, None])  # dS = P ∘ (dP - D)
        dk += tl.dot(
            tl.trans(ds.to(q.dtype)), q, input_precision=PRECISION
        )  # dK = dSᵀ Q (scaled below)
    tl.store(
        dK + base + offs_n[:, None] * D + offs_d[None, :],
        (dk * sm_scale).to(dK.dtype.element_ty),
        mask=kv_mask,
    )
    tl.store(
        dV + base + offs_n[:, None] * D + offs_d[None, :],
        dv.to(dV.dtype.element_ty),
        mask=kv_mask,
    )


@_jit
def _bwd_dq_kernel(
    Q,
    K,
    V,
    dO,
    L,
    Delta,
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
    """One tile of queries: stream the keys it sees and accumulate dQ = dS K. A separate
    kernel so that no two programs add into the same rows (no atomics)."""
    start_m, bh = tl.program_id(0), tl.program_id(1)
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    base = bh.to(tl.int64) * N * D
    d_ok = offs_d[None, :] < D
    q_mask = (offs_m[:, None] < N) & d_ok
    q = tl.load(
        Q + base + offs_m[:, None] * D + offs_d[None, :], mask=q_mask, other=0.0
    )  # (BLOCK_M, BLOCK_D)
    do = tl.load(
        dO + base + offs_m[:, None] * D + offs_d[None, :], mask=q_mask, other=0.0
    )  # (BLOCK_M, BLOCK_D)
    lse = tl.load(L + bh.to(tl.int64) * N + offs_m, mask=offs_m < N, other=0.0)
    delta = tl.load(Delta + bh.to(tl.int64) * N + offs_m, mask=offs_m < N, other=0.0)
    dq = tl.zeros([BLOCK_M, BLOCK_D], dtype=tl.float32)
    hi = tl.minimum((start_m + 1) * BLOCK_M, N) if CAUSAL else N
    for start_n in range(0, hi, BLOCK_N):
        cols = start_n + offs_n
        kv_mask = (cols[:, None] < N) & d_ok
        k = tl.load(
            K + base + cols[:, None] * D + offs_d[None, :], mask=kv_mask, other=0.0
        )
        v = tl.load(
            V + base + cols[:, None] * D + offs_d[None, :], mask=kv_mask, other=0.0
        )
        s = tl.dot(q, tl.trans(k), input_precision=PRECISION) * qk_scale
        valid = (offs_m[:, None] < N) & (cols[None, :] < N)
        if CAUSAL:
            valid = valid & (offs_m[:, None] >= cols[None, :])
        p = tl.where(valid, tl.exp2(s - lse[:, None]), 0.0)
        dp = tl.dot(do, tl.trans(v), input_precision=PRECISION)
        ds = p * (dp - delta[:, None])
        dq += tl.dot(ds.to(k.dtype), k, input_precision=PRECISION)
    tl.store(
        dQ + base + offs_m[:, None] * D + offs_d[None, :],
        (dq * sm_scale).to(dQ.dtype.element_ty),
        mask=q_mask,
    )


# --8<-- [end:backward]


def _check(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
    if not HAVE_TRITON:
        raise RuntimeError(
            "flash_attention_triton needs Triton: pip install -e '.[triton]' (Linux)"
        )
    if q.dim() != 4 or q.shape != k.shape or q.shape != v.shape:
        raise ValueError(
            f"q, k, v must all be (B, H, N, d) of one shape, got {tuple(q.shape)}, "
            f"{tuple(k.shape)}, {tuple(v.shape)}"
        )
    if not 16 <= q.shape[-1] <= 128:
        raise ValueError(
            f"head dim d = {q.shape[-1]} is not supported: the kernels take 16 <= d <= 128"
        )
    if not (q.dtype == k.dtype == v.dtype) or q.dtype not in (
        torch.float16,
        torch.bfloat16,
        torch.float32,
    ):
        raise TypeError(
            f"q, k, v must share one dtype of fp16, bf16 or fp32, got {q.dtype}, {k.dtype}, {v.dtype}"
        )
    if INTERPRETED and q.dtype == torch.bfloat16:
        raise TypeError(
            "Triton's interpreter computes bf16 wrongly; use fp16 or fp32 on a CPU"
        )
    if not INTERPRETED and not (q.is_cuda and k.is_cuda and v.is_cuda):
        raise ValueError(
            "compiled Triton kernels need CUDA tensors (on a CPU, set TRITON_INTERPRET=1)"
        )


def _config(d: int, dtype: torch.dtype) -> dict:
    # Small tiles under the interpreter (NumPy does the work, tile by tile). On a GPU, 64×64
    # tiles, or 32×32 for fp32 with d > 64, so that the tiles of K, V (or Q, dO), double
    # buffered, stay well inside shared memory. Untuned: no autotuning here.
    block_d = max(16, triton.next_power_of_2(d))
    block = (
        16 if INTERPRETED else (32 if dtype == torch.float32 and block_d > 64 else 64)
    )
    return dict(
        BLOCK_M=block,
        BLOCK_N=block,
        BLOCK_D=block_d,
        PRECISION="ieee" if dtype == torch.float32 else "tf32",
        num_warps=4,
        num_stages=2,
    )  # the last two are launch options (the interpreter ignores them)


# --8<-- [start:function]
class FlashAttentionTriton(torch.autograd.Function):
    """Saves q, k, v, O and L (B, H, N): nothing of size N×N."""

    @staticmethod
    def forward(
        ctx, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool
    ) -> torch.Tensor:
        B, H, N, d = q.shape
        q, k, v = (
            t.contiguous() for t in (q, k, v)
        )  # (B, H, N, d): row-major, so (B·H, N, d) in memory
        o = torch.empty_like(q)
        lse = torch.empty(B, H, N, device=q.device, dtype=torch.float32)  # log2 units
        cfg = _config(d, q.dtype)
        sm_scale = 1.0 / math.sqrt(d)
        grid = (triton.cdiv(N, cfg["BLOCK_M"]), B * H)
        _fwd_kernel[grid](q, k, v, o, lse, N, d, sm_scale * LOG2E, CAUSAL=causal, **cfg)
        ctx.save_for_backward(q, k, v, o, lse)
        ctx.causal, ctx.sm_scale, ctx.cfg = causal, sm_scale, cfg
        return o

    @staticmethod
    def backward(ctx, do: torch.Tensor):
        q, k, v, o, lse = ctx.saved_tensors
        B, H, N, d = q.shape
        cfg = ctx.cfg
        do = do.contiguous()
        delta = (do.float() * o.float()).sum(
            -1
        )  # D = rowsum(dO ∘ O), (B, H, N): FA-2 Algorithm 2, line 4
        dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
        args = (N, d, ctx.sm_scale * LOG2E, ctx.sm_scale)
        _bwd_dkdv_kernel[(triton.cdiv(N, cfg["BLOCK_N"]), B * H)](
            q, k, v, do, lse, delta, dk, dv, *args, CAUSAL=ctx.causal, **cfg
        )
        _bwd_dq_kernel[(triton.cdiv(N, cfg["BLOCK_M"]), B * H)](
            q, k, v, do, lse, delta, dq, *args, CAUSAL=ctx.causal, **cfg
        )
        return dq, dk, dv, None


def flash_attention_triton(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False
) -> torch.Tensor:
    """softmax(q kᵀ / √d) v over (B, H, N, d), like ``F.scaled_dot_product_attention``; differentiable."""
    _check(q, k, v)
    return FlashAttentionTriton.apply(q, k, v, causal)


# --8<-- [end:function]


def check_against_sdpa(
    B: int,
    H: int,
    N: int,
    d: int,
    causal: bool,
    dtype: torch.dtype,
    device: torch.device,
    seed: int = 0,
) -> dict:
    """Outputs and gradients of the kernels beside SDPA's on the same random inputs; returns
    the largest differences, max |ours - SDPA| / max(1, max |SDPA|), so that one tolerance
    fits outputs and gradients of any size (the oracle runs in fp32 for low-precision inputs)."""
    gen = torch.Generator().manual_seed(seed)
    q, k, v, do = (
        torch.randn(B, H, N, d, generator=gen).to(device, dtype) for _ in range(4)
    )
    q, k, v = (t.requires_grad_() for t in (q, k, v))
    out = flash_attention_triton(q, k, v, causal)
    grads = torch.autograd.grad(out, (q, k, v), do)
    ref_in = [t.detach().float().requires_grad_() for t in (q, k, v)]
    ref = F.scaled_dot_product_attention(*ref_in, is_causal=causal)
    ref_grads = torch.autograd.grad(ref, ref_in, do.float())
    errors = {}
    for name, got, want in zip(
        ("out", "dq", "dk", "dv"), (out, *grads), (ref, *ref_grads)
    ):
        errors[name] = (got.float() - want).abs().max().item() / max(
            1.0, want.abs().max().item()
        )
    return errors


def main() -> dict:
    if not HAVE_TRITON:
        print0(
            "Triton is not installed: nothing to check (pip install -e '.[triton]' to run the kernels)"
        )
        return {"triton": None, "checked": False, "tables": {"check": []}}
    dev = torch.device("cpu" if INTERPRETED else "cuda")
    mode = (
        "interpreted on the CPU (TRITON_INTERPRET=1)"
        if INTERPRETED
        else f"compiled for {torch.cuda.get_device_name()}"
    )
    # The interpreter walks each tile in Python, so the CPU check stays tiny; N = 37 is not
    # a multiple of the 16-row tiles, so the masked edge tiles are exercised too.
    shapes = [(1, 2, 37, 32)] if INTERPRETED else [(2, 4, 1000, 64), (1, 2, 4096, 128)]
    dtypes = (
        [torch.float32, torch.float16]
        if INTERPRETED
        else [torch.float32, torch.float16, torch.bfloat16]
    )
    tolerance = {torch.float32: 1e-4, torch.float16: 2e-2, torch.bfloat16: 6e-2}
    rows = []
    print0(
        f"Triton {triton.__version__}, kernels {mode}; reference: F.scaled_dot_product_attention"
    )
    print0(
        "error = max |ours - SDPA| / max(1, max |SDPA|), for the output and each gradient"
    )
    for B, H, N, d in shapes:
        for dtype in dtypes:
            for causal in (False, True):
                err = check_against_sdpa(B, H, N, d, causal, dtype, dev)
                worst = max(err.values())
                assert worst <= tolerance[dtype], (
                    f"{dtype} causal={causal} (B,H,N,d)={(B, H, N, d)}: {err}"
                )
                rows.append(
                    {
                        "shape (B,H,N,d)": f"{B},{H},{N},{d}",
                        "dtype": str(dtype).removeprefix("torch."),
                        "causal": causal,
                        **{f"max error {k}": v for k, v in err.items()},
                    }
                )
                print0(
                    f"  {rows[-1]['shape (B,H,N,d)']:>12} {rows[-1]['dtype']:>8} causal={causal!s:5}  "
                    + "  ".join(f"{k} {v:.1e}" for k, v in err.items())
                    + f"  ≤ {tolerance[dtype]:g} ✓"
                )
    return {
        "triton": triton.__version__,
        "interpreted": INTERPRETED,
        "checked": True,
        "tables": {"check": rows},
    }


if __name__ == "__main__":
    raise SystemExit(main_entry(main, SPEC))
