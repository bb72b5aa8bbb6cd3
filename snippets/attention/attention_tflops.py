"""Forward TFLOP/s of our attention beside SDPA's flash backend, on one CUDA GPU.

    python -m snippets bench attention --tflops [--json]

For each (N, causal) the Triton kernel (``triton``), the tiled PyTorch version
(``flash``) and ``F.scaled_dot_product_attention`` restricted to its FlashAttention
backend (``sdpa``) run the forward on the same bf16 inputs. Each output is checked
against SDPA's first; then the implementations are timed in interleaved repeats (one
sample of each per round, so a GPU that heats up or a neighbour that wakes up slows all
of them alike). A sample is enough back-to-back calls to last about 20 ms.

FLOPs are counted by formula, not by a profiler: 4·B·H·N²·d for the two matmuls
S = Q Kᵀ and O = P V, halved when causal (``forward_flops``). TFLOP/s is that ÷ the
median time; the spread is the slowest and fastest sample's TFLOP/s. ``vs_sdpa`` is
ours ÷ SDPA's TFLOP/s, from the same run, and ``separated`` says whether the two
spreads do not overlap: only then is one ahead of the other.
"""

from __future__ import annotations

import json
import math
import statistics
from typing import Callable

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from snippets.attention.attention_timing import forward_flops
from snippets.attention.flash_attention import flash_attention
from snippets.attention.flash_attention_triton import flash_attention_triton
from snippets.attention.triton_support import COMPILED
from snippets.core.measure import time_it
from snippets.core.runtime import UsageError

FORWARD_IMPLS = ("triton", "flash", "sdpa")
SEQ_LENS = (4096, 8192, 16384)
BATCH, HEADS, HEAD_DIM = 4, 16, 128  # a realistic layer: 16 heads of 128, B = 4
SAMPLE_S = 0.02  # each sample runs about this long
Forward = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, bool], torch.Tensor]
# timer(fn, calls) -> seconds per call, over `calls` back-to-back calls of fn()
Timer = Callable[[Callable[[], object], int], float]


def sdpa_flash(q, k, v, causal: bool) -> torch.Tensor:
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal)


def forward_impls(block_q: int | None = None, block_k: int | None = None) -> dict:
    tiles = {"block_q": block_q, "block_k": block_k}
    tiles = {name: size for name, size in tiles.items() if size is not None}
    return {
        "triton": flash_attention_triton,
        "flash": lambda q, k, v, causal: flash_attention(q, k, v, causal, **tiles),
        "sdpa": sdpa_flash,
    }


def cuda_timer(device: torch.device) -> Timer:
    def seconds_per_call(fn: Callable[[], object], calls: int) -> float:
        def many() -> None:
            for _ in range(calls):
                fn()

        return time_it(many, warmup=0, iters=1, device=device) / calls

    return seconds_per_call


def _spread_apart(a: list[float], b: list[float]) -> bool:
    return max(a) < min(b) or max(b) < min(a)


@torch.no_grad()
def measure_tflops(
    impls: dict[str, Forward],
    N: int,
    causal: bool,
    *,
    B: int = BATCH,
    H: int = HEADS,
    d: int = HEAD_DIM,
    dtype: torch.dtype = torch.bfloat16,
    device: torch.device,
    repeats: int = 7,
    timer: Timer,
) -> list[dict]:
    """One record per implementation at this (N, causal); ``impls`` must include
    ``sdpa``, the reference for the check and the ratio."""
    gen = torch.Generator().manual_seed(N)
    q, k, v = (
        torch.randn(B, H, N, d, generator=gen).to(device, dtype) for _ in range(3)
    )  # (B, H, N, d)
    calls = {name: lambda fn=fn: fn(q, k, v, causal) for name, fn in impls.items()}
    want = calls["sdpa"]().float()
    tol = 2e-3 if dtype == torch.float32 else 5e-2
    for name, call in calls.items():  # the first call compiles, and is checked
        err = (call().float() - want).abs().max().item()
        assert err <= tol * want.abs().max().item(), (
            f"{name} N={N} causal={causal}: differs from SDPA by {err:.2e}"
        )
    per_sample = {
        name: max(1, math.ceil(SAMPLE_S / timer(c, 1))) for name, c in calls.items()
    }
    samples: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(repeats):
        for name, call in calls.items():
            samples[name].append(timer(call, per_sample[name]))
    flops = forward_flops(B, H, N, d, causal)
    records = []
    for name, times in samples.items():
        median = statistics.median(times)
        records.append(
            {
                "impl": name,
                "batch": B,
                "heads": H,
                "seq_len": N,
                "head_dim": d,
                "causal": causal,
                "dtype": str(dtype).removeprefix("torch."),
                "repeats": repeats,
                "calls_per_sample": per_sample[name],
                "flops": flops,
                "time_s": median,
                "tflops": flops / median / 1e12,
                "tflops_min": flops / max(times) / 1e12,
                "tflops_max": flops / min(times) / 1e12,
            }
        )
    sdpa = next(r for r in records if r["impl"] == "sdpa")
    for r in records:
        r["vs_sdpa"] = r["tflops"] / sdpa["tflops"]
        apart = _spread_apart(samples[r["impl"]], samples["sdpa"])
        r["separated"] = None if r["impl"] == "sdpa" else apart
    return records


HEADER = (
    f"{'causal':>6} {'N':>6}  {'impl':<7}{'ms':>9} {'TFLOP/s':>8} "
    f"{'spread':>13} {'÷ SDPA':>7}  separated"
)


def format_row(r: dict) -> str:
    spread = f"{r['tflops_min']:.1f}-{r['tflops_max']:.1f}"
    apart = {None: "-", True: "yes", False: "no"}[r["separated"]]
    return (
        f"{r['causal']!s:>6} {r['seq_len']:>6}  {r['impl']:<7}"
        f"{r['time_s'] * 1e3:>9.3f} {r['tflops']:>8.1f} {spread:>13} "
        f"{r['vs_sdpa']:>7.2f}  {apart}"
    )


def title(B: int, H: int, d: int, dtype: str, device: str, repeats: int) -> list[str]:
    return [
        f"attention forward, B={B} H={H} d={d} {dtype} on {device}, "
        f"{repeats} interleaved repeats",
        "TFLOP/s = 4·B·H·N²·d (half if causal) ÷ median time; spread = min-max;",
        "÷ SDPA is ours ÷ SDPA's flash backend, from the same run",
    ]


def run(opts, dev: torch.device, timer: Timer | None = None) -> int:
    """The ``--tflops`` command: options from ``bench attention``'s parser."""
    if dev.type != "cuda" or not COMPILED:
        raise UsageError(
            "--tflops needs a CUDA GPU and Triton; this machine has "
            + ("no GPU" if not torch.cuda.is_available() else "no Triton")
        )
    dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(opts.dtype or "bf16")
    if dtype is None:
        raise UsageError("--tflops: SDPA's flash backend takes fp16 or bf16, not fp32")
    if set(opts.impls or ()) - set(FORWARD_IMPLS):
        raise UsageError(f"--tflops measures {', '.join(FORWARD_IMPLS)} only")
    names = set(opts.impls or FORWARD_IMPLS) | {"sdpa"}  # sdpa: the reference
    impls = {
        n: f for n, f in forward_impls(opts.block_q, opts.block_k).items() if n in names
    }
    B, H, d = opts.batch or BATCH, opts.heads or HEADS, opts.head_dim or HEAD_DIM
    repeats = opts.iters or 7
    if not opts.json:
        dtype_name = str(dtype).removeprefix("torch.")
        name = torch.cuda.get_device_name(dev)
        print("\n".join(title(B, H, d, dtype_name, name, repeats)))
        print(HEADER)
    for causal in (True,) if opts.causal else (False, True):
        for N in opts.seq_lens or SEQ_LENS:
            for r in measure_tflops(
                impls,
                N,
                causal,
                B=B,
                H=H,
                d=d,
                dtype=dtype,
                device=dev,
                repeats=repeats,
                timer=timer or cuda_timer(dev),
            ):
                print(json.dumps(r) if opts.json else format_row(r), flush=True)
    return 0
