"""FlashAttention-2 as Triton kernels, differentiable like SDPA, checked against it.

The tiled algorithm of ``flash_attention``, one Triton program per tile:
``flash_triton_forward`` holds the forward kernel (one program per tile of queries),
``flash_triton_backward`` the two backward kernels (per tile of keys for dK, dV; per
tile of queries for dQ). This module is the autograd function that launches them and
the check against ``F.scaled_dot_product_attention``.

Same interface as ``flash_attention``: ``(B, H, N, d)`` tensors, a ``causal`` flag,
any N (the tiles past the end are masked), head dims 16-128 (padded to a power of two
inside the kernel and masked).

Where it runs:

* On a CUDA GPU: compiled kernels (fp16, bf16, fp32; fp32 matmuls in IEEE precision).
* Without a GPU: Triton's interpreter runs the same kernels with NumPy on the CPU
  (``TRITON_INTERPRET=1``, see ``triton_support``); fp32 and fp16 only, not bf16.
* Without Triton installed: the module still imports; calling the kernels says how to
  install it (``pip install -e '.[triton]'``).

    python -m snippets run flash_attention_triton
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from snippets.attention.flash_triton_backward import flash_dkdv_kernel, flash_dq_kernel
from snippets.attention.flash_triton_forward import flash_forward_kernel
from snippets.attention.triton_support import HAVE_TRITON, INTERPRETED, LOG2E, triton
from snippets.core.claims import law
from snippets.core.cli import main_entry
from snippets.core.runtime import Spec, print0

SPEC = Spec(
    summary="FlashAttention-2 forward and backward as Triton kernels, checked vs SDPA",
    gpu_path=True,
)
DTYPES = (torch.float16, torch.bfloat16, torch.float32)


def _check(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
    if not HAVE_TRITON:
        raise RuntimeError(
            "flash_attention_triton needs Triton: pip install -e '.[triton]' (Linux)"
        )
    if q.dim() != 4 or q.shape != k.shape or q.shape != v.shape:
        raise ValueError(
            "q, k, v must all be (B, H, N, d) of one shape, got "
            f"{tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}"
        )
    if not 16 <= q.shape[-1] <= 128:
        raise ValueError(
            f"head dim d = {q.shape[-1]} is not supported: the kernels take "
            "16 <= d <= 128"
        )
    if not (q.dtype == k.dtype == v.dtype) or q.dtype not in DTYPES:
        raise TypeError(
            "q, k, v must share one dtype of fp16, bf16 or fp32, "
            f"got {q.dtype}, {k.dtype}, {v.dtype}"
        )
    if INTERPRETED and q.dtype == torch.bfloat16:
        raise TypeError(
            "Triton's interpreter computes bf16 wrongly; use fp16 or fp32 on a CPU"
        )
    if not INTERPRETED and not (q.is_cuda and k.is_cuda and v.is_cuda):
        raise ValueError(
            "compiled Triton kernels need CUDA tensors "
            "(on a CPU, set TRITON_INTERPRET=1)"
        )


def _config(d: int, dtype: torch.dtype) -> dict:
    # Small tiles under the interpreter (NumPy does the work, tile by tile). On a GPU,
    # 64×64 tiles, or 32×32 for fp32 with d > 64, so that the tiles of K, V (or Q,
    # dO), double buffered, stay well inside shared memory. Untuned: no autotuning.
    block_d = max(16, triton.next_power_of_2(d))
    if INTERPRETED:
        block = 16
    else:
        block = 32 if dtype == torch.float32 and block_d > 64 else 64
    return dict(
        BLOCK_M=block,
        BLOCK_N=block,
        BLOCK_D=block_d,
        PRECISION="ieee" if dtype == torch.float32 else "tf32",
        num_warps=4,  # this and num_stages are launch options (the interpreter
        num_stages=2,  # ignores them)
    )


# --8<-- [start:function]
class FlashAttentionTriton(torch.autograd.Function):
    """Saves q, k, v, O and L (B, H, N): nothing of size N×N."""

    @staticmethod
    def forward(
        ctx, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool
    ) -> torch.Tensor:
        B, H, N, d = q.shape
        # (B, H, N, d) row-major is (B·H, N, d) in memory, as the kernels read it
        q, k, v = (t.contiguous() for t in (q, k, v))
        o = torch.empty_like(q)
        lse = torch.empty(B, H, N, device=q.device, dtype=torch.float32)  # log2 units
        cfg = _config(d, q.dtype)
        sm_scale = 1.0 / math.sqrt(d)
        grid = (triton.cdiv(N, cfg["BLOCK_M"]), B * H)  # the paper's loop over Q_i
        flash_forward_kernel[grid](
            q, k, v, o, lse, N, d, sm_scale * LOG2E, CAUSAL=causal, **cfg
        )
        ctx.save_for_backward(q, k, v, o, lse)
        ctx.causal, ctx.sm_scale, ctx.cfg = causal, sm_scale, cfg
        return o

    @staticmethod
    def backward(ctx, do: torch.Tensor):
        q, k, v, o, lse = ctx.saved_tensors
        B, H, N, d = q.shape
        cfg = ctx.cfg
        do = do.contiguous()
        # D = rowsum(dO ∘ O), (B, H, N): FA-2 Algorithm 2, line 4
        delta = (do.float() * o.float()).sum(-1)
        dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
        args = (N, d, ctx.sm_scale * LOG2E, ctx.sm_scale)
        flash_dkdv_kernel[(triton.cdiv(N, cfg["BLOCK_N"]), B * H)](
            q, k, v, do, lse, delta, dk, dv, *args, CAUSAL=ctx.causal, **cfg
        )
        flash_dq_kernel[(triton.cdiv(N, cfg["BLOCK_M"]), B * H)](
            q, k, v, do, lse, delta, dq, *args, CAUSAL=ctx.causal, **cfg
        )
        return dq, dk, dv, None


def flash_attention_triton(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False
) -> torch.Tensor:
    """softmax(q kᵀ / √d) v over (B, H, N, d), like SDPA; differentiable."""
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
    """Outputs and gradients of the kernels beside SDPA's on the same random inputs.
    Returns the largest differences, max |ours - SDPA| / max(1, max |SDPA|), so that
    one tolerance fits outputs and gradients of any size (the oracle runs in fp32 for
    low-precision inputs)."""
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
        scale = max(1.0, want.abs().max().item())
        errors[name] = (got.float() - want).abs().max().item() / scale
    return errors


def main() -> dict:
    if not HAVE_TRITON:
        print0("Triton is not installed: nothing to check")
        print0("(pip install -e '.[triton]' to run the kernels)")
        return {"triton": None, "checked": False, "tables": {"check": []}}
    dev = torch.device("cpu" if INTERPRETED else "cuda")
    if INTERPRETED:
        mode = "interpreted on the CPU (TRITON_INTERPRET=1)"
    else:
        mode = f"compiled for {torch.cuda.get_device_name()}"
    # The interpreter walks each tile in Python, so the CPU check stays tiny; N = 37 is
    # not a multiple of the 16-row tiles, so the masked edge tiles are exercised too.
    shapes = [(1, 2, 37, 32)] if INTERPRETED else [(2, 4, 1000, 64), (1, 2, 4096, 128)]
    dtypes = [torch.float32, torch.float16]
    if not INTERPRETED:
        dtypes.append(torch.bfloat16)
    tolerance = {torch.float32: 1e-4, torch.float16: 2e-2, torch.bfloat16: 6e-2}
    rows = []
    print0(f"Triton {triton.__version__}, kernels {mode}")
    print0("reference: F.scaled_dot_product_attention; error = max |ours - SDPA| /")
    print0("max(1, max |SDPA|), for the output and each gradient")
    names = ("out", "dq", "dk", "dv")
    print0(
        f"  {'B,H,N,d':>12} {'dtype':>8} {'causal':>6} "
        + " ".join(f"{n:>7}" for n in names)
        + f"  {'tolerance':>9}"
    )
    for B, H, N, d in shapes:
        for dtype in dtypes:
            for causal in (False, True):
                err = check_against_sdpa(B, H, N, d, causal, dtype, dev)
                law(
                    max(err.values()) <= tolerance[dtype],
                    f"{dtype} causal={causal} (B,H,N,d)={(B, H, N, d)}: {err}",
                )
                dtype_name = str(dtype).removeprefix("torch.")
                shape = f"{B},{H},{N},{d}"
                rows.append(
                    {"B,H,N,d": shape, "dtype": dtype_name, "causal": causal} | err
                )
                print0(
                    f"  {shape:>12} {dtype_name:>8} "
                    f"{causal!s:>6} "
                    + " ".join(f"{err[n]:>7.1e}" for n in names)
                    + f"  ≤ {tolerance[dtype]:<7g} ✓"
                )
    return {
        "triton": triton.__version__,
        "interpreted": INTERPRETED,
        "checked": True,
        "tables": {"check": rows},
    }


if __name__ == "__main__":
    raise SystemExit(main_entry(main, SPEC))
