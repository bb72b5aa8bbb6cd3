"""Benchmark: attention's forward + backward time and peak memory, for the naive version
that materialises the N×N scores, our tiled FlashAttention-2 in PyTorch, torch's SDPA,
and (on a GPU) our Triton kernels, all measured in the same run; with ``--tflops``, the
forward's TFLOP/s beside SDPA's flash backend on a GPU.

    python -m snippets bench attention [--seq-lens N ...] [--head-dim D] [--batch B]
        [--heads H] [--causal] [--iters R] [--impls naive flash sdpa triton]
        [--dtype fp32|fp16|bf16] [--device auto|cpu|cuda] [--block-q BQ]
        [--block-k BK] [--threads T] [--tflops] [--json]
    python -m snippets run attention_bench       # a small sweep into results/

For every N each implementation is first checked against SDPA (output and gradients);
that call is its warm-up. Then they take turns, one call each a round, the first
rotating (``snippets.core.timing``), so a machine that gets busier mid-run slows them
all alike. One call is ``out = attention(q, k, v); torch.autograd.grad(out, (q, k, v),
dO)``. A record is the harness's, against SDPA: the median time and its IQR, and
``ratio`` = time ÷ SDPA's in the same round, its median and IQR. ``memory_vs_naive``
is peak ÷ the naive version's peak. ``--json`` prints one record per (implementation,
N).

Peak memory is measured, not computed: on a GPU the caching allocator's high-water
mark, on a CPU the running sum of the allocation and free events torch's profiler
records (``snippets.core.measure.peak_memory_bytes``), both above the inputs already in
memory. Throughput uses the usual count: a forward is two N×N×d matmuls per head,
4·B·H·N²·d FLOPs, and forward + backward is 3.5× that (the backward does five matmuls
to the forward's two); causal attention does half.

``--tflops`` (on one CUDA GPU, with Triton; exit 2 without): for each (N, causal) the
Triton kernel, the tiled PyTorch version and SDPA restricted to its FlashAttention
backend run the forward on the same inputs, defaults B=4 H=16 d=128 bf16, N = 4096,
8192, 16384, causal and not, 7 rounds. Each output is checked against SDPA's first,
then they take turns as above; a sample is enough back-to-back calls to last about
20 ms. TFLOP/s is the formula's FLOPs ÷ the median time, its spread the IQR's;
``vs_sdpa`` is ours ÷ SDPA's TFLOP/s (SDPA's time ÷ ours, round by round), and
``separated`` says whether the IQR of that ratio stays off 1: only then is one ahead.
"""

from __future__ import annotations

import json
import math
import sys
import time
from typing import Callable, Sequence

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from snippets.attention.flash_attention import flash_attention, head_dim
from snippets.attention.flash_attention_triton import flash_attention_triton
from snippets.attention.triton_support import COMPILED
from snippets.core.charts import line_chart
from snippets.core.claims import TIED, law
from snippets.core.cli import OneLineParser, guarded, main_entry, positive_int
from snippets.core.measure import peak_memory_bytes
from snippets.core.parts import Excerpt
from snippets.core.runtime import Spec, UsageError, print0
from snippets.core.timing import Clock, interleave, record, spread

BENCH = "attention"
SPEC = Spec(
    timed=True,  # it measures time: run-all runs it alone
    gpu_path=True,
    gpu_bench=("--tflops", "--json"),  # the forward's TFLOP/s beside SDPA's
    summary="attention fwd+bwd: time and measured peak memory, naive vs tiled vs SDPA",
)
IMPLS = ("naive", "flash", "sdpa", "triton")
ROUNDS = 5  # a sweep's default: timed calls of each implementation per N, in turns
DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
FORWARD_IMPLS = ("triton", "flash", "sdpa")
SEQ_LENS = (4096, 8192, 16384)
BATCH, HEADS, HEAD_DIM = 4, 16, 128  # a realistic layer: 16 heads of 128, B = 4
SAMPLE_S = 0.02  # each --tflops sample runs about this long
MEMINFO = "/proc/meminfo"  # the kernel's MemAvailable: Linux's; macOS keeps none
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
    """Check each implementation against SDPA, then time them in turns and measure
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
    for name, step in steps.items():  # the check is each one's warm-up call
        for label, got, want in zip(("out", "dq", "dk", "dv"), step(), reference):
            err = (got.float() - want).abs().max().item()
            law(
                err <= tol * max(1.0, want.abs().max().item()),
                f"{name} N={N}: {label} differs from SDPA by {err:.2e}",
            )
    rounds = interleave(steps, iters, warmup=0, device=device)
    records = []
    for name, step in steps.items():
        found = {"impl": name, "seq_len": N, "head_dim": d, "batch": B, "heads": H,
                 "causal": causal, "dtype": str(dtype).removeprefix("torch."),
                 "device": device.type}  # fmt: skip
        found |= against(rounds, name, "sdpa")  # time ÷ SDPA's, round by round
        found["peak_bytes"] = peak_memory_bytes(step, device)
        found["tflops"] = attention_flops(B, H, N, d, causal) / found["time_s"] / 1e12
        records.append(found)
    by = {r["impl"]: r for r in records}
    for r in records:
        r["memory_vs_naive"] = (
            r["peak_bytes"] / by["naive"]["peak_bytes"] if "naive" in by else None
        )
    return records


# --8<-- [end:measure]


def against(rounds, name: str, baseline: str) -> dict:
    """The harness's record of ``name`` against ``baseline``; without the baseline in
    the run, the times alone (ratios None)."""
    if baseline in rounds.wall:
        return record(rounds, name, baseline)
    alone = record(rounds, name, name)
    return {k: (None if k.startswith(("ratio", "speedup", "order", "cpu_ratio"))
                or k.startswith("baseline") else v)
            for k, v in alone.items()}  # fmt: skip


def available_bytes(device: torch.device) -> float:
    """Free memory now: the GPU's, or the kernel's MemAvailable (inf where unknown)."""
    if device.type == "cuda":
        return float(torch.cuda.mem_get_info(device)[0])
    try:
        with open(MEMINFO) as f:
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


@torch.no_grad()
def measure_tflops(
    impls: dict[str, Attention],
    N: int,
    causal: bool,
    *,
    B: int = BATCH,
    H: int = HEADS,
    d: int = HEAD_DIM,
    dtype: torch.dtype = torch.bfloat16,
    device: torch.device,
    rounds: int = 7,
    clock: Clock = time.perf_counter,
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
        law(
            err <= tol * want.abs().max().item(),
            f"{name} N={N} causal={causal}: differs from SDPA by {err:.2e}",
        )
    one = interleave(calls, 1, warmup=0, device=device, clock=clock).wall
    per_sample = {name: max(1, math.ceil(SAMPLE_S / one[name][0])) for name in calls}
    timed = interleave(calls, rounds, warmup=0, calls=per_sample, device=device,
                       clock=clock)  # fmt: skip
    flops = forward_flops(B, H, N, d, causal)
    records = []
    for name in calls:
        r = record(timed, name, "sdpa")
        t = spread(r, "time")
        records.append(
            {
                "impl": name, "batch": B, "heads": H, "seq_len": N, "head_dim": d,
                "causal": causal, "dtype": str(dtype).removeprefix("torch."),
                "rounds": rounds, "calls_per_sample": per_sample[name],
                "flops": flops, "time_s": t.median, "time_lo_s": t.lo,
                "time_hi_s": t.hi, "tflops": flops / t.median / 1e12,
                "tflops_lo": flops / t.hi / 1e12, "tflops_hi": flops / t.lo / 1e12,
                # ours ÷ SDPA's TFLOP/s = SDPA's time ÷ ours, round by round
                "vs_sdpa": r["speedup"], "vs_sdpa_lo": r["speedup_lo"],
                "vs_sdpa_hi": r["speedup_hi"],
                "separated": None if name == "sdpa" else r["order"] != TIED,
                "times_s": r["times_s"],
            }
        )  # fmt: skip
    return records


TFLOPS_HEADER = (
    f"{'causal':>6} {'N':>6}  {'impl':<7}{'ms':>9} {'TFLOP/s':>8} "
    f"{'IQR':>13} {'÷ SDPA':>7}  separated"
)


def tflops_row(r: dict) -> str:
    iqr = f"{r['tflops_lo']:.1f}-{r['tflops_hi']:.1f}"
    apart = {None: "-", True: "yes", False: "no"}[r["separated"]]
    return (
        f"{r['causal']!s:>6} {r['seq_len']:>6}  {r['impl']:<7}"
        f"{r['time_s'] * 1e3:>9.3f} {r['tflops']:>8.1f} {iqr:>13} "
        f"{r['vs_sdpa']:>7.2f}  {apart}"
    )


def tflops_title(B: int, H: int, d: int, dtype: str, device: str, rounds: int) -> list:
    return [
        f"attention forward, B={B} H={H} d={d} {dtype} on {device}, "
        f"{rounds} rounds in turns",
        "TFLOP/s = 4·B·H·N²·d (half if causal) ÷ median time; IQR of the same;",
        "÷ SDPA is ours ÷ SDPA's flash backend round by round, its median",
    ]


def run_tflops(opts, dev: torch.device) -> int:
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
    rounds = opts.iters or 7
    if not opts.json:
        dtype_name = str(dtype).removeprefix("torch.")
        name = torch.cuda.get_device_name(dev)
        print("\n".join(tflops_title(B, H, d, dtype_name, name, rounds)))
        print(TFLOPS_HEADER)
    for causal in (True,) if opts.causal else (False, True):
        for N in opts.seq_lens or SEQ_LENS:
            for r in measure_tflops(
                impls, N, causal, B=B, H=H, d=d, dtype=dtype, device=dev,
                rounds=rounds,
            ):  # fmt: skip
                print(json.dumps(r) if opts.json else tflops_row(r), flush=True)
    return 0


HEADER = (
    f"{'N':>7} {'impl':>7} {'fwd+bwd':>14} {'peak memory':>14} {'TFLOP/s':>8} "
    f"{'time ÷ SDPA':>13} {'memory ÷ naive':>15}"
)


def format_row(r: dict) -> str:
    def ratio(x: float | None) -> str:
        return "-" if x is None else f"{x:.2f}"

    return (
        f"{r['seq_len']:>7} {r['impl']:>7} {r['time_s'] * 1e3:>11.1f} ms "
        f"{r['peak_bytes'] / 2**20:>10.1f} MiB {r['tflops']:>8.3f} "
        f"{ratio(r['ratio']):>13} {ratio(r['memory_vs_naive']):>15}"
    )


def _choose_device(name: str) -> torch.device:
    if name == "cuda" and not torch.cuda.is_available():
        raise UsageError(
            "--device cuda needs a CUDA GPU and this machine has none; use --device cpu"
        )
    auto = name == "auto" and torch.cuda.is_available()
    return torch.device("cuda" if name == "cuda" or auto else "cpu")


def _parser() -> OneLineParser:
    parser = OneLineParser(
        prog="python -m snippets bench attention", description=__doc__.split("\n")[0]
    )
    number = dict(type=positive_int, default=None)
    parser.add_argument(
        "--seq-lens", nargs="+", metavar="N", help="sequence lengths", **number
    )
    parser.add_argument("--head-dim", type=head_dim, metavar="D")
    parser.add_argument("--batch", metavar="B", **number)
    parser.add_argument("--heads", metavar="H", **number)
    parser.add_argument("--causal", action="store_true", help="causal only")
    parser.add_argument(
        "--iters", help="timed rounds (default 3; 7 for --tflops)", **number
    )
    parser.add_argument(
        "--impls",
        nargs="+",
        choices=IMPLS,
        metavar="IMPL",
        help=f"a subset of {', '.join(IMPLS)} (default: all that run here)",
    )
    parser.add_argument(
        "--dtype", choices=DTYPES, help="default: fp32 on a CPU, bf16 on a GPU"
    )
    parser.add_argument(
        "--device", default="auto", choices=("auto", "cpu", "cuda"), help="default auto"
    )
    parser.add_argument("--block-q", help="query tile of the tiled version", **number)
    parser.add_argument("--block-k", help="key tile of the tiled version", **number)
    parser.add_argument(
        "--threads", help="CPU threads for torch while measuring", **number
    )
    parser.add_argument(
        "--tflops", action="store_true", help="forward TFLOP/s vs SDPA's flash backend"
    )
    parser.add_argument(
        "--json", action="store_true", help="one JSON record per (implementation, N)"
    )
    return parser


def _sweep(opts, dev: torch.device) -> int:
    names = opts.impls or [n for n in IMPLS if n != "triton" or dev.type == "cuda"]
    if "triton" in names and not (dev.type == "cuda" and COMPILED):
        raise UsageError(
            "--impls triton needs a CUDA GPU and Triton (pip install -e '.[triton]')"
        )
    default = torch.bfloat16 if dev.type == "cuda" else torch.float32
    dtype = DTYPES[opts.dtype] if opts.dtype else default
    seq_lens = opts.seq_lens or [
        512 * 2**i for i in range(6 if dev.type == "cuda" else 5)
    ]
    tiles = implementations(opts.block_q, opts.block_k)
    impls = {n: f for n, f in tiles.items() if n in names}
    B, H, d, iters = (
        opts.batch or 1,
        opts.heads or 1,
        opts.head_dim or 64,
        opts.iters or 3,
    )
    if not opts.json:
        kind = "causal" if opts.causal else "full"
        dtype_name = str(dtype).removeprefix("torch.")
        threads = torch.get_num_threads()
        print(
            f"attention fwd+bwd, B={B} H={H} d={d} {dtype_name} {kind} on {dev.type} "
            f"({threads} threads), median of {iters}"
        )
        print(HEADER)
    sweep(
        seq_lens,
        impls,
        B=B,
        H=H,
        d=d,
        causal=opts.causal,
        dtype=dtype,
        device=dev,
        iters=iters,
        emit=lambda r: print(json.dumps(r) if opts.json else format_row(r), flush=True),
    )
    return 0


# ``bench attention`` is a program of its own, not ``bench_program`` over ``main``: it
# sweeps wider (N up to 8192 on a CPU, 16384 in bf16 on a GPU, on every thread) and
# times ``--tflops``, while ``main`` is the note's small fp32 sweep on one thread, whose
# laws (naive memory ≥ N², 3× a doubling) hold for the note's shapes, not for any shape
# an option may ask for.
def bench(argv: list[str]) -> int:
    opts = _parser().parse_args(argv)

    def body() -> int:
        dev = _choose_device(opts.device)
        threads = torch.get_num_threads()
        if opts.threads:
            torch.set_num_threads(opts.threads)
        try:
            return run_tflops(opts, dev) if opts.tflops else _sweep(opts, dev)
        finally:
            torch.set_num_threads(threads)

    return guarded(body)


def _figures(
    records: list[dict], names: list[str], where: str, unread: str | None = None
) -> dict:
    """The time and memory charts; ``unread`` (free memory not read) is said under
    the memory chart, the one it bears on."""

    def series(key: str, unit: float) -> dict:
        return {
            name: [(r["seq_len"], r[key] / unit) for r in records if r["impl"] == name]
            for name in names
        }

    impls = ", ".join(names)
    return {
        "time": line_chart(
            series("time_s", 1.0),
            title=f"attention forward + backward, {where}",
            x_label="sequence length N",
            y_label="seconds",
            log_x=True,
            log_y=True,
            y_unit="s",
            description=f"Measured time of one forward and backward pass of {impls} "
            "attention against sequence length N, both axes logarithmic.",
        ),
        "memory": line_chart(
            series("peak_bytes", 2**20),
            title="peak memory of forward + backward (measured)",
            x_label="sequence length N",
            y_label="MiB above the inputs",
            log_x=True,
            log_y=True,
            y_unit="MiB",
            description=f"Measured peak memory above the inputs of {impls} attention "
            "(forward and backward) against sequence length N, both axes logarithmic."
            + (f" {unread}" if unread else ""),
        ),
    }


def main() -> dict:
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    impls = implementations()
    if dev.type == "cpu" or not COMPILED:
        impls.pop("triton")
    seq_lens = [256, 512, 1024, 2048]  # small: this runs on every push
    threads = torch.get_num_threads()
    # on a shared, busy CPU one thread gives steady ratios; many threads, noise
    torch.set_num_threads(1)
    said = Excerpt()  # what the note shows: what ran, and how it was timed
    try:
        said(f"attention fwd+bwd, B=1 H=1 d=64 fp32 on {dev.type} (1 thread),")
        said(f"median of {ROUNDS}; each checked against SDPA first")
        print0(HEADER)
        records = sweep(
            seq_lens, impls, device=dev, emit=lambda r: print0(format_row(r))
        )
    finally:
        torch.set_num_threads(threads)
    # The paper's point, checked on measured numbers (the note states them): the naive
    # version holds at least one N×N fp32 matrix and its peak grows at least 3× per
    # doubling of N; the tiled one and SDPA need less than one at the largest N.
    naive = [r["peak_bytes"] for r in records if r["impl"] == "naive"]
    law(all(b >= 3 * a for a, b in zip(naive, naive[1:])), f"naive: {naive}")
    for r in records:
        n_by_n = 4 * r["seq_len"] ** 2
        if r["impl"] == "naive":
            law(
                r["peak_bytes"] >= n_by_n,
                f"naive at N={r['seq_len']} peaked at {r['peak_bytes']} B < N²·4",
            )
        if r["impl"] in ("flash", "sdpa") and r["seq_len"] == max(seq_lens):
            law(
                r["peak_bytes"] < n_by_n,
                f"{r['impl']} at N={r['seq_len']}: peak {r['peak_bytes']} B ≥ N²·4",
            )
    table = [
        {
            "N": r["seq_len"],
            "impl": r["impl"],
            "fwd+bwd (ms)": r["time_s"] * 1e3,
            "peak (MiB)": r["peak_bytes"] / 2**20,
            "time ÷ SDPA [IQR]": spread(r).text(),
            "memory ÷ naive": r["memory_vs_naive"],
        }
        for r in records
    ]
    where = "one CPU thread" if dev.type == "cpu" else torch.cuda.get_device_name()
    unread = None  # what this machine could not say, in one sentence
    if math.isinf(available_bytes(dev)):
        unread = (
            f"This machine's kernel gives no MemAvailable ({MEMINFO}), so its free "
            "memory was not read: naive attention ran at every N, unchecked against "
            "what would fit."
        )
        print0(unread)
    figures = _figures(records, list(impls), where, unread)
    return {"records": records, "tables": {"sweep": table}, "figures": figures,
            "excerpts": {"summary": said.lines}, "not_measured": unread}  # fmt: skip


if __name__ == "__main__":
    raise SystemExit(main_entry(main, SPEC))
