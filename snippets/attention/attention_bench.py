"""Benchmark: attention's forward + backward time and peak memory, for the naive version that
materialises the N×N scores, our tiled FlashAttention-2 in PyTorch, torch's SDPA, and (on a
GPU) our Triton kernels, all measured in the same run.

    python -m snippets bench attention [--seq-lens 512 1024 2048 4096 8192] [--head-dim 64]
                                       [--batch 1] [--heads 1] [--causal] [--iters 3]
                                       [--impls naive flash sdpa triton] [--dtype fp32|fp16|bf16]
                                       [--device auto|cpu|cuda] [--block-q BQ] [--block-k BK]
                                       [--threads T] [--json]

For every N each implementation is first checked against SDPA (output and gradients), then
the implementations are timed *alternately*, one call each per round, so a machine that
gets busier mid-run slows them all alike; the median over rounds is reported. One call is
``out = attention(q, k, v); torch.autograd.grad(out, (q, k, v), dO)``.

Peak memory is measured, not computed: on a GPU the caching allocator's high-water mark, on
a CPU the running sum of the allocation and free events torch's profiler records
(``snippets.core.measure.peak_memory_bytes``), both above the inputs already in memory.

Throughput uses the usual count: a forward is two N×N×d matmuls per head, 4·B·H·N²·d FLOPs,
and forward + backward is 3.5× that (the backward does five matmuls to the forward's two);
causal attention does half. ``time_vs_sdpa`` is time ÷ SDPA's time at the same N,
``memory_vs_naive`` is peak ÷ the naive version's peak. ``--json`` prints one record per
(implementation, N).

As a snippet (``python -m snippets run attention_bench``) it runs a small, fast sweep and
writes the table and two plots to results/.
"""

from __future__ import annotations

import json
import math
import statistics
import sys
from typing import Callable, Sequence

import torch
import torch.nn.functional as F

from snippets.attention import flash_attention_triton
from snippets.attention.flash_attention import (
    MAX_HEAD_DIM,
    MIN_HEAD_DIM,
    flash_attention,
)
from snippets.core.cli import OneLineParser, guarded, main_entry, positive_int
from snippets.core.measure import peak_memory_bytes, time_it
from snippets.core.runtime import Spec, UsageError, print0
from snippets.core.svg import line_chart

BENCH = "attention"
SPEC = Spec(
    summary="attention fwd+bwd: time and measured peak memory, naive vs tiled vs SDPA"
)
IMPLS = ("naive", "flash", "sdpa", "triton")
DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
Attention = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, bool], torch.Tensor]


# --8<-- [start:naive]
def naive_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False
) -> torch.Tensor:
    """softmax(Q Kᵀ/√d) V the textbook way: the (B, H, N, N) scores and probabilities are
    real tensors, and autograd keeps the probabilities for the backward."""
    N, d = q.shape[-2], q.shape[-1]
    s = q @ k.transpose(-2, -1) / math.sqrt(d)  # (B, H, N, N)
    if causal:
        s = s.masked_fill(
            torch.ones(N, N, dtype=torch.bool, device=q.device).triu(1), float("-inf")
        )
    return torch.softmax(s, dim=-1) @ v  # (B, H, N, d)


# --8<-- [end:naive]


def implementations(
    block_q: int | None = None, block_k: int | None = None
) -> dict[str, Attention]:
    blocks = {
        k: v for k, v in (("block_q", block_q), ("block_k", block_k)) if v is not None
    }
    return {
        "naive": naive_attention,
        "flash": lambda q, k, v, causal: flash_attention(q, k, v, causal, **blocks),
        "sdpa": lambda q, k, v, causal: F.scaled_dot_product_attention(
            q, k, v, is_causal=causal
        ),
        "triton": flash_attention_triton.flash_attention_triton,
    }


def attention_flops(B: int, H: int, N: int, d: int, causal: bool) -> float:
    """Forward + backward FLOPs: 3.5 × 4·B·H·N²·d, halved when causal (FlashAttention-2 §4)."""
    return 3.5 * 4 * B * H * N * N * d / (2 if causal else 1)


# --8<-- [start:measure]
def fwd_bwd(
    fn: Attention,
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    do: torch.Tensor,
    causal: bool,
) -> Callable[[], tuple[torch.Tensor, ...]]:
    """One training step's worth of attention: forward, then the gradients of q, k, v."""

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
    """Check each implementation against SDPA, then time them alternately and measure each
    one's peak memory. Returns one record per implementation."""
    gen = torch.Generator().manual_seed(N)
    q, k, v, do = (
        torch.randn(B, H, N, d, generator=gen).to(device, dtype) for _ in range(4)
    )  # (B, H, N, d)
    q, k, v = (t.requires_grad_() for t in (q, k, v))
    steps = {name: fwd_bwd(fn, q, k, v, do, causal) for name, fn in impls.items()}
    reference = [
        t.float()
        for t in fwd_bwd(
            implementations()["sdpa"], *(t.float() for t in (q, k, v, do)), causal
        )()
    ]
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
        r["memory_vs_naive"] = (
            r["peak_bytes"] / by["naive"]["peak_bytes"] if "naive" in by else None
        )
    return records


# --8<-- [end:measure]


def format_row(r: dict) -> str:
    ratio = lambda x: "-" if x is None else f"{x:.2f}"  # noqa: E731
    return (
        f"{r['seq_len']:>7} {r['impl']:>7} {r['time_s'] * 1e3:>11.1f} ms {r['peak_bytes'] / 2**20:>10.1f} MiB "
        f"{r['tflops']:>8.3f} {ratio(r['time_vs_sdpa']):>13} {ratio(r['memory_vs_naive']):>15}"
    )


HEADER = f"{'N':>7} {'impl':>7} {'fwd+bwd':>14} {'peak memory':>14} {'TFLOP/s':>8} {'time ÷ SDPA':>13} {'memory ÷ naive':>15}"


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
    iters: int = 3,
    emit: Callable[[dict], None] | None = None,
) -> list[dict]:
    """Measure every implementation at every N; the naive one is left out where its N×N
    tensors (about four live at once, in the backward) would not fit in free memory."""
    records = []
    for N in seq_lens:
        here = dict(impls)
        if (
            "naive" in here
            and 4 * B * H * N * N * dtype.itemsize > 0.8 * available_bytes(device)
        ):
            del here["naive"]
            print(
                f"N={N}: naive attention left out, its N×N tensors would not fit in free memory",
                file=sys.stderr,
            )
        for r in measure(here, B, H, N, d, causal, dtype, device, iters):
            records.append(r)
            if emit:
                emit(r)
    return records


def _choose_device(name: str) -> torch.device:
    if name not in ("auto", "cpu", "cuda"):
        raise UsageError(f"unknown device {name!r}: choose auto, cpu or cuda")
    if name == "cuda" and not torch.cuda.is_available():
        raise UsageError(
            "--device cuda needs a CUDA GPU and this machine has none; use --device cpu"
        )
    return torch.device(
        "cuda"
        if name == "cuda" or (name == "auto" and torch.cuda.is_available())
        else "cpu"
    )


def bench(argv: list[str]) -> int:
    parser = OneLineParser(
        prog="python -m snippets bench attention", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "--seq-lens",
        nargs="+",
        type=positive_int,
        metavar="N",
        help="sequence lengths (default: 512 … 8192 on a CPU, 512 … 16384 on a GPU)",
    )
    parser.add_argument("--head-dim", type=positive_int, default=64, metavar="D")
    parser.add_argument("--batch", type=positive_int, default=1, metavar="B")
    parser.add_argument("--heads", type=positive_int, default=1, metavar="H")
    parser.add_argument("--causal", action="store_true")
    parser.add_argument(
        "--iters", type=positive_int, default=3, help="timed rounds (default 3)"
    )
    parser.add_argument(
        "--impls",
        nargs="+",
        choices=IMPLS,
        metavar="IMPL",
        help=f"a subset of {', '.join(IMPLS)} (default: all that run here; triton only on a GPU)",
    )
    parser.add_argument(
        "--dtype", choices=DTYPES, help="default: fp32 on a CPU, bf16 on a GPU"
    )
    parser.add_argument("--device", default="auto", help="auto (default), cpu or cuda")
    parser.add_argument(
        "--block-q", type=positive_int, help="query tile of the tiled PyTorch version"
    )
    parser.add_argument(
        "--block-k", type=positive_int, help="key tile of the tiled PyTorch version"
    )
    parser.add_argument(
        "--threads",
        type=positive_int,
        help="CPU threads for torch (default: torch's own choice)",
    )
    parser.add_argument(
        "--json", action="store_true", help="one JSON record per (implementation, N)"
    )
    opts = parser.parse_args(argv)
    d = opts.head_dim
    if not MIN_HEAD_DIM <= d <= MAX_HEAD_DIM or d % 8:
        parser.error(
            f"--head-dim {d} is not supported: use a multiple of 8 from {MIN_HEAD_DIM} to {MAX_HEAD_DIM}"
        )

    def body() -> int:
        dev = _choose_device(opts.device)
        if opts.threads:
            torch.set_num_threads(opts.threads)
        compiled_triton = (
            flash_attention_triton.HAVE_TRITON
            and not flash_attention_triton.INTERPRETED
        )
        names = opts.impls or [
            n
            for n in IMPLS
            if n != "triton" or (dev.type == "cuda" and compiled_triton)
        ]
        if "triton" in names and not (dev.type == "cuda" and compiled_triton):
            raise UsageError(
                "--impls triton needs a CUDA GPU and Triton installed (pip install -e '.[triton]')"
            )
        dtype = (
            DTYPES[opts.dtype]
            if opts.dtype
            else (torch.bfloat16 if dev.type == "cuda" else torch.float32)
        )
        seq_lens = opts.seq_lens or [
            512 * 2**i for i in range(6 if dev.type == "cuda" else 5)
        ]
        impls = {
            n: f
            for n, f in implementations(opts.block_q, opts.block_k).items()
            if n in names
        }
        if not opts.json:
            print(
                f"attention fwd+bwd, B={opts.batch} H={opts.heads} d={d} {str(dtype).removeprefix('torch.')} "
                f"{'causal' if opts.causal else 'full'} on {dev.type} ({torch.get_num_threads()} CPU threads), "
                f"median of {opts.iters}"
            )
            print(HEADER)
        sweep(
            seq_lens,
            impls,
            B=opts.batch,
            H=opts.heads,
            d=d,
            causal=opts.causal,
            dtype=dtype,
            device=dev,
            iters=opts.iters,
            emit=lambda r: print(
                json.dumps(r) if opts.json else format_row(r), flush=True
            ),
        )
        return 0

    return guarded(body)


# --8<-- [start:main]
def main() -> dict:
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    impls = implementations()
    if dev.type == "cpu" or not (
        flash_attention_triton.HAVE_TRITON and not flash_attention_triton.INTERPRETED
    ):
        impls.pop("triton")
    seq_lens = [
        256,
        512,
        1024,
        2048,
    ]  # small: this runs on every push; the bench command goes further
    threads = torch.get_num_threads()
    torch.set_num_threads(
        1
    )  # on a shared, busy CPU one thread gives steady ratios; many threads, noise
    try:
        print0(
            f"attention fwd+bwd, B=1 H=1 d=64 fp32 on {dev.type} (1 thread), median of 3; "
            "each checked against SDPA first"
        )
        print0(HEADER)
        records = sweep(
            seq_lens, impls, device=dev, emit=lambda r: print0(format_row(r))
        )
    finally:
        torch.set_num_threads(threads)
    # The paper's point, checked on measured numbers: the naive version must hold at least one
    # N×N fp32 matrix; the tiled one must not need even one at the largest N.
    for r in records:
        n_by_n = 4 * r["seq_len"] ** 2
        if r["impl"] == "naive":
            assert r["peak_bytes"] >= n_by_n, (
                f"naive at N={r['seq_len']} peaked at {r['peak_bytes']} B < N²·4"
            )
        if r["impl"] == "flash" and r["seq_len"] == max(seq_lens):
            assert r["peak_bytes"] < n_by_n, (
                f"tiled at N={r['seq_len']} peaked at {r['peak_bytes']} B ≥ N²·4"
            )
    table = [
        {
            "N": r["seq_len"],
            "impl": r["impl"],
            "fwd+bwd (ms)": r["time_s"] * 1e3,
            "peak (MiB)": r["peak_bytes"] / 2**20,
            "time ÷ SDPA": r["time_vs_sdpa"],
            "memory ÷ naive": r["memory_vs_naive"],
        }
        for r in records
    ]
    series = lambda key: {
        name: [(r["seq_len"], r[key]) for r in records if r["impl"] == name]  # noqa: E731
        for name in impls
    }
    figures = {
        "time": line_chart(
            series("time_s"),
            title="attention forward + backward",
            x_label="sequence length N",
            y_label="seconds",
            log_x=True,
            log_y=True,
        ),
        "memory": line_chart(
            {
                n: [(x, y / 2**20) for x, y in pts]
                for n, pts in series("peak_bytes").items()
            },
            title="peak memory of forward + backward (measured)",
            x_label="sequence length N",
            y_label="MiB above the inputs",
            log_x=True,
            log_y=True,
        ),
    }
    return {"records": records, "tables": {"sweep": table}, "figures": figures}


# --8<-- [end:main]


if __name__ == "__main__":
    raise SystemExit(main_entry(main, SPEC))
