"""Measuring attention's forward + backward: time and peak memory, per implementation.

For every N each implementation is first checked against SDPA (output and gradients),
then the implementations are timed *alternately*, one call each per round, so a machine
that gets busier mid-run slows them all alike; the median over rounds is reported. One
call is ``out = attention(q, k, v); torch.autograd.grad(out, (q, k, v), dO)``.

Peak memory is measured, not computed: on a GPU the caching allocator's high-water
mark, on a CPU the running sum of the allocation and free events torch's profiler
records (``snippets.core.measure.peak_memory_bytes``), both above the inputs already in
memory.

Throughput uses the usual count: a forward is two N×N×d matmuls per head,
4·B·H·N²·d FLOPs, and forward + backward is 3.5× that (the backward does five
matmuls to the forward's two); causal attention does half.
"""

from __future__ import annotations

import math
import statistics
import sys
from typing import Callable, Sequence

import torch
import torch.nn.functional as F

from snippets.attention.flash_attention import flash_attention
from snippets.attention.flash_attention_triton import flash_attention_triton
from snippets.core.claims import Spread
from snippets.core.measure import peak_memory_bytes, time_it

IMPLS = ("naive", "flash", "sdpa", "triton")
ROUNDS = 5  # a sweep's default: timed calls of each implementation per N, in turns
Attention = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, bool], torch.Tensor]


# --8<-- [start:naive]
def naive_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False
) -> torch.Tensor:
    """softmax(Q Kᵀ/√d) V the textbook way: the (B, H, N, N) scores and
    probabilities are real tensors, and autograd keeps the probabilities for the
    backward."""
    N, d = q.shape[-2], q.shape[-1]
    s = q @ k.transpose(-2, -1) / math.sqrt(d)  # (B, H, N, N)
    if causal:
        above = torch.ones(N, N, dtype=torch.bool, device=q.device).triu(1)
        s = s.masked_fill(above, float("-inf"))
    return torch.softmax(s, dim=-1) @ v  # (B, H, N, d)


# --8<-- [end:naive]


def sdpa(q, k, v, causal: bool) -> torch.Tensor:
    return F.scaled_dot_product_attention(q, k, v, is_causal=causal)


def implementations(
    block_q: int | None = None, block_k: int | None = None
) -> dict[str, Attention]:
    tiles = {"block_q": block_q, "block_k": block_k}
    tiles = {name: size for name, size in tiles.items() if size is not None}
    return {
        "naive": naive_attention,
        "flash": lambda q, k, v, causal: flash_attention(q, k, v, causal, **tiles),
        "sdpa": sdpa,
        "triton": flash_attention_triton,
    }


def forward_flops(B: int, H: int, N: int, d: int, causal: bool) -> float:
    """Two N×N×d matmuls per head (S = Q Kᵀ, O = P V), 2 FLOPs per multiply-add:
    4·B·H·N²·d; a causal mask leaves half of them (FlashAttention-2 §4)."""
    return 4 * B * H * N * N * d / (2 if causal else 1)


def attention_flops(B: int, H: int, N: int, d: int, causal: bool) -> float:
    """Forward + backward: the backward does five matmuls to the forward's two,
    so 3.5× the forward."""
    return 3.5 * forward_flops(B, H, N, d, causal)


# --8<-- [start:measure]
def fwd_bwd(
    fn: Attention,
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    do: torch.Tensor,
    causal: bool,
) -> Callable[[], tuple[torch.Tensor, ...]]:
    """One training step's worth of attention: forward, then q, k, v's gradients."""

    def step() -> tuple[torch.Tensor, ...]:
        out = fn(q, k, v, causal)  # (B, H, N, d)
        return (out, *torch.autograd.grad(out, (q, k, v), do))

    return step


def measure(
    impls: dict[str, Attention],
    B: int,
    H: int,
    N: int,
    d: int,
    causal: bool,
    dtype: torch.dtype,
    device: torch.device,
    iters: int,
) -> list[dict]:
    """Check each implementation against SDPA, then time them alternately and measure
    each one's peak memory. Returns one record per implementation."""
    gen = torch.Generator().manual_seed(N)
    q, k, v, do = (
        torch.randn(B, H, N, d, generator=gen).to(device, dtype) for _ in range(4)
    )  # (B, H, N, d)
    q, k, v = (t.requires_grad_() for t in (q, k, v))
    steps = {name: fwd_bwd(fn, q, k, v, do, causal) for name, fn in impls.items()}
    fp32 = (t.float() for t in (q, k, v, do))
    reference = [t.float() for t in fwd_bwd(sdpa, *fp32, causal)()]
    tol = 2e-3 if dtype == torch.float32 else 6e-2
    for name, step in steps.items():  # the first call also warms up
        for label, got, want in zip(("out", "dq", "dk", "dv"), step(), reference):
            err = (got.float() - want).abs().max().item()
            assert err <= tol * max(1.0, want.abs().max().item()), (
                f"{name} N={N}: {label} differs from SDPA by {err:.2e}"
            )
    times: dict[str, list[float]] = {name: [] for name in steps}
    for _ in range(iters):
        for name, step in steps.items():
            times[name].append(time_it(step, warmup=0, iters=1, device=device))
    records = []
    for name, step in steps.items():
        t = statistics.median(times[name])
        records.append(
            {
                "impl": name,
                "seq_len": N,
                "head_dim": d,
                "batch": B,
                "heads": H,
                "causal": causal,
                "dtype": str(dtype).removeprefix("torch."),
                "device": device.type,
                "time_s": t,
                "peak_bytes": peak_memory_bytes(step, device),
                "tflops": attention_flops(B, H, N, d, causal) / t / 1e12,
            }
        )
    by = {r["impl"]: r for r in records}
    for r in records:
        r["time_vs_sdpa"] = r["time_s"] / by["sdpa"]["time_s"] if "sdpa" in by else None
        # the same ratio round by round (both timed in that round), for its spread
        paired = [a / b for a, b in zip(times[r["impl"]], times.get("sdpa", []))]
        r["time_vs_sdpa_rounds"] = list(Spread.of(paired)) if paired else None
        r["memory_vs_naive"] = (
            r["peak_bytes"] / by["naive"]["peak_bytes"] if "naive" in by else None
        )
    return records


# --8<-- [end:measure]


def available_bytes(device: torch.device) -> float:
    """Free memory now: the GPU's, or the kernel's MemAvailable (inf where unknown)."""
    if device.type == "cuda":
        return float(torch.cuda.mem_get_info(device)[0])
    try:
        with open("/proc/meminfo") as f:
            return next(
                int(line.split()[1]) * 1024.0
                for line in f
                if line.startswith("MemAvailable:")
            )
    except (OSError, StopIteration):
        return math.inf


def sweep(
    seq_lens: Sequence[int],
    impls: dict[str, Attention],
    *,
    B: int = 1,
    H: int = 1,
    d: int = 64,
    causal: bool = False,
    dtype: torch.dtype = torch.float32,
    device: torch.device = torch.device("cpu"),
    iters: int = ROUNDS,
    emit: Callable[[dict], None] | None = None,
) -> list[dict]:
    """Measure every implementation at every N; the naive one is left out where its
    N×N tensors (about four live at once, in the backward) would not fit in memory."""
    records = []
    for N in seq_lens:
        here = dict(impls)
        n_by_n = 4 * B * H * N * N * dtype.itemsize
        if "naive" in here and n_by_n > 0.8 * available_bytes(device):
            del here["naive"]
            print(
                f"N={N}: naive attention left out, its N×N tensors would not fit",
                file=sys.stderr,
            )
        for r in measure(here, B, H, N, d, causal, dtype, device, iters):
            records.append(r)
            if emit:
                emit(r)
    return records
