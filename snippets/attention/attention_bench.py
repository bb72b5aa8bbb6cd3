"""Benchmark: attention's forward + backward time and peak memory, for the naive version
that materialises the N×N scores, our tiled FlashAttention-2 in PyTorch, torch's SDPA,
and (on a GPU) our Triton kernels, all measured in the same run (``attention_timing``);
with ``--tflops``, the forward's TFLOP/s beside SDPA's flash backend on a GPU
(``attention_tflops``).

    python -m snippets bench attention [--seq-lens N ...] [--head-dim D] [--batch B]
        [--heads H] [--causal] [--iters R] [--impls naive flash sdpa triton]
        [--dtype fp32|fp16|bf16] [--device auto|cpu|cuda] [--block-q BQ]
        [--block-k BK] [--threads T] [--tflops] [--json]

``time_vs_sdpa`` is time ÷ SDPA's time at the same N (``time_vs_sdpa_rounds``: the
median and quartiles of that ratio round by round), ``memory_vs_naive`` is peak ÷
the naive version's peak. ``--json`` prints one record per (implementation, N).
``--tflops`` defaults to B=4 H=16 d=128 bf16, N = 4096, 8192, 16384, causal and not,
7 repeats; it needs a CUDA GPU and Triton, and says so (exit 2) without them.
As a snippet (``run attention_bench``) it runs a small sweep into results/.
"""

from __future__ import annotations

import json

import torch

from snippets.attention import attention_tflops as tf
from snippets.attention.attention_timing import IMPLS, ROUNDS, implementations, sweep
from snippets.attention.flash_attention import head_dim
from snippets.attention.triton_support import COMPILED
from snippets.core.charts import line_chart
from snippets.core.claims import Spread
from snippets.core.cli import OneLineParser, guarded, main_entry, positive_int
from snippets.core.runtime import Spec, UsageError, print0

BENCH = "attention"
SPEC = Spec(
    timed=True,  # it measures time: run-all runs it alone
    gpu_path=True,
    summary="attention fwd+bwd: time and measured peak memory, naive vs tiled vs SDPA",
)
DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
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
        f"{ratio(r['time_vs_sdpa']):>13} {ratio(r['memory_vs_naive']):>15}"
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


def bench(argv: list[str]) -> int:
    opts = _parser().parse_args(argv)

    def body() -> int:
        dev = _choose_device(opts.device)
        threads = torch.get_num_threads()
        if opts.threads:
            torch.set_num_threads(opts.threads)
        try:
            return tf.run(opts, dev) if opts.tflops else _sweep(opts, dev)
        finally:
            torch.set_num_threads(threads)

    return guarded(body)


def _figures(records: list[dict], names: list[str], where: str) -> dict:
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
            description=f"Measured peak memory above the inputs of {impls} attention "
            "(forward and backward) against sequence length N, both axes logarithmic.",
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
    try:
        print0(f"attention fwd+bwd, B=1 H=1 d=64 fp32 on {dev.type} (1 thread),")
        print0(f"median of {ROUNDS}; each checked against SDPA first")
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
    assert all(b >= 3 * a for a, b in zip(naive, naive[1:])), f"naive: {naive}"
    for r in records:
        n_by_n = 4 * r["seq_len"] ** 2
        if r["impl"] == "naive":
            assert r["peak_bytes"] >= n_by_n, (
                f"naive at N={r['seq_len']} peaked at {r['peak_bytes']} B < N²·4"
            )
        if r["impl"] in ("flash", "sdpa") and r["seq_len"] == max(seq_lens):
            assert r["peak_bytes"] < n_by_n, (
                f"{r['impl']} at N={r['seq_len']}: peak {r['peak_bytes']} B ≥ N²·4"
            )
    table = [
        {
            "N": r["seq_len"],
            "impl": r["impl"],
            "fwd+bwd (ms)": r["time_s"] * 1e3,
            "peak (MiB)": r["peak_bytes"] / 2**20,
            "time ÷ SDPA [IQR]": Spread(*r["time_vs_sdpa_rounds"]).text(),
            "memory ÷ naive": r["memory_vs_naive"],
        }
        for r in records
    ]
    where = "one CPU thread" if dev.type == "cpu" else torch.cuda.get_device_name()
    figures = _figures(records, list(impls), where)
    return {"records": records, "tables": {"sweep": table}, "figures": figures}


if __name__ == "__main__":
    raise SystemExit(main_entry(main, SPEC))
