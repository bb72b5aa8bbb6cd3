"""The roofline of the machine this runs on: measured matmul FLOP/s and bandwidth.

Williams, Waterman & Patterson (CACM 2009): a kernel that does F floating-point
operations and moves B bytes to and from memory has arithmetic intensity I = F / B,
and can run no faster than

    attainable(I) = min(peak FLOP/s, bandwidth × I).

Below the knee I* = peak / bandwidth a kernel is memory-bound; above it, compute-bound.
Both ceilings here are measured, not read off a datasheet ("maximum achievable"):

* peak: the best median FLOP/s of a sweep of matmuls (m, n, k) and dtypes; a matmul
  does 2mnk FLOPs and, at best, moves each operand once: (mk + kn + mn) · element bytes;
* bandwidth: the best median of a copy (reads n, writes n bytes) and an add (reads 2n,
  writes n), over sizes at least four times the last-level cache, so that the data
  comes from memory, not cache.

NVIDIA's published H100 and H200 figures stand beside it, cited as theirs. On a GPU the
same module measures the GPU (bf16, fp16 and fp32 with TF32 off).

    python -m snippets run roofline [--dtype fp32 …] [--max-n N] [--json]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

from snippets.core.charts import Note, line_chart
from snippets.core.claims import Spread
from snippets.core.cli import main_entry, positive_int
from snippets.core.measure import time_samples
from snippets.core.runtime import Spec, UsageError, print0

SPEC = Spec(
    summary="this machine's roofline: measured peak matmul FLOP/s and bandwidth",
    timed=True,  # it measures time: run-all runs nothing beside it
    gpu_path=True,  # the GPU check measures the GPU's roof
)
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
# NVIDIA's datasheets (H100 SXM5, 2023; H200 SXM, 2024): dense bf16 tensor-core peak,
# HBM bandwidth. Theirs, not measured here.
PUBLISHED = {
    "H100 SXM (NVIDIA)": {"peak_flops": 989e12, "bandwidth": 3.35e12},
    "H200 SXM (NVIDIA)": {"peak_flops": 989e12, "bandwidth": 4.8e12},
}


# --8<-- [start:measure]
def spread(samples: list[float]) -> dict:
    s = Spread.of(samples)  # the project's median and quartiles
    return {"median": s.median, "q1": s.lo, "q3": s.hi}


def matmul_point(m: int, n: int, k: int, dtype: torch.dtype, dev: torch.device):
    """FLOP/s of (m, k) @ (k, n): median and quartiles over timed repeats."""
    a = torch.randn(m, k, device=dev).to(dtype)
    b = torch.randn(k, n, device=dev).to(dtype)
    flops, size = 2 * m * n * k, a.element_size()
    seconds = time_samples(lambda: a @ b, warmup=2, iters=7, device=dev)
    rate = spread([flops / s for s in seconds])
    intensity = flops / ((m * k + k * n + m * n) * size)  # each operand moved once
    return {"shape": f"{m}×{n}×{k}", "intensity": intensity, **rate}


def stream_point(kind: str, numel: int, dev: torch.device) -> dict:
    """Bytes/s of a copy (2 × n × 4 bytes moved) or an add (3 × n × 4), fp32."""
    x, y, out = (torch.ones(numel, device=dev) for _ in range(3))
    if kind == "copy":
        run, moved = (lambda: out.copy_(x)), 2 * numel * 4
    else:
        run, moved = (lambda: torch.add(x, y, out=out)), 3 * numel * 4
    seconds = time_samples(run, warmup=2, iters=7, device=dev)
    return {
        "kind": kind,
        "MiB": numel * 4 / 2**20,
        **spread([moved / s for s in seconds]),
    }


def last_level_cache_bytes(dev: torch.device) -> int:
    if dev.type == "cuda":
        return torch.cuda.get_device_properties(dev).L2_cache_size
    sizes = []  # the CPU's caches, from sysfs where it is there
    for index in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*"):
        text = (index / "size").read_text().strip() if (index / "size").exists() else ""
        if text[:-1].isdigit():
            sizes.append(int(text[:-1]) * {"K": 2**10, "M": 2**20}.get(text[-1], 1))
    return max(sizes, default=32 * 2**20)


# --8<-- [end:measure]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--dtype", action="append", choices=list(DTYPES), default=None,
        help="matmul dtypes (repeatable; default fp32 on a CPU, all three on a GPU)",
    )  # fmt: skip
    parser.add_argument(
        "--max-n", type=positive_int, default=None, metavar="N",
        help="largest square matmul side (default 2048 on a CPU, 8192 on a GPU)",
    )  # fmt: skip
    parser.add_argument("--json", dest="as_json", action="store_true")


# --8<-- [start:main]
def main(dtype: list | None = None, max_n: int | None = None, as_json: bool = False):
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    gpu = dev.type == "cuda"
    names = dtype or (list(DTYPES) if gpu else ["fp32"])
    top = max_n or (8192 if gpu else 2048)
    if top < 64:
        raise UsageError(f"--max-n must be at least 64, got {top}")
    if gpu:
        torch.backends.cuda.matmul.allow_tf32 = False  # fp32 means fp32
    sides = [s for s in (256, 512, 1024, 2048, 4096, 8192, 16384) if s <= top] or [top]
    shapes = [(s, s, s) for s in sides] + [(top, top, 64), (top, 64, top)]
    matmuls = [
        {"dtype": name, **matmul_point(m, n, k, DTYPES[name], dev)}
        for name in names
        for m, n, k in shapes
    ]
    cache = last_level_cache_bytes(dev)
    big = [4 * cache, 8 * cache]  # bytes of one buffer: far past the cache
    streams = [stream_point(kind, b // 4, dev) for kind in ("copy", "add") for b in big]
    best = max(matmuls, key=lambda r: r["median"])
    copy = max((r for r in streams if r["kind"] == "copy"), key=lambda r: r["median"])
    peak, bandwidth = best["median"], copy["median"]
    knee = peak / bandwidth
    for r in matmuls:  # each dtype's roof: its own best matmul, the one bandwidth
        own = max(q["median"] for q in matmuls if q["dtype"] == r["dtype"])
        roof = min(own, bandwidth * r["intensity"])
        r |= {"bound": "compute" if r["intensity"] > own / bandwidth else "memory",
              "of roof": r["median"] / roof}  # fmt: skip
    record = {
        "device": torch.cuda.get_device_name(dev) if gpu else "cpu",
        "peak_matmul_flops": peak,
        "peak_dtype": best["dtype"],
        "peak_shape": best["shape"],
        "bandwidth_bytes_per_s": bandwidth,
        "knee_flop_per_byte": knee,
        "last_level_cache_bytes": cache,
        "published": PUBLISHED,  # NVIDIA's figures, cited, not measured
    }
    if as_json:
        print0(json.dumps(record))
    else:
        under = sum(r["bound"] == "memory" for r in matmuls)
        print0(f"knee at {knee:.1f} FLOP/byte: the best matmul ÷ the best copy")
        print0(f"memory-bound matmuls of the sweep: {under} of {len(matmuls)}")
    shown = {"tables": tables(matmuls, streams), "figures": figures(record, matmuls)}
    return record | shown


# --8<-- [end:main]


def tables(matmuls: list[dict], streams: list[dict]) -> dict:
    giga = 1e9
    top = max(r["median"] for r in matmuls)
    unit, scale = ("TFLOP/s", 1e12) if top >= 1e13 else ("GFLOP/s", giga)
    mm = [
        {"dtype": r["dtype"], "m×n×k": r["shape"],
         "FLOP/byte": round(r["intensity"], 1),
         f"{unit} (median)": f"{r['median'] / scale:.1f}",
         "IQR": f"{r['q1'] / scale:.1f}–{r['q3'] / scale:.1f}",
         "bound": r["bound"], "of its dtype's roof": f"{r['of roof']:.0%}"}
        for r in matmuls
    ]  # fmt: skip
    st = [
        {"op": r["kind"], "MiB a buffer": round(r["MiB"]),
         "GB/s (median)": f"{r['median'] / giga:.1f}",
         "IQR": f"{r['q1'] / giga:.1f}–{r['q3'] / giga:.1f}"}
        for r in streams
    ]  # fmt: skip
    published = [
        {"GPU": name, "bf16 dense TFLOP/s": p["peak_flops"] / 1e12,
         "HBM TB/s": p["bandwidth"] / 1e12,
         "knee FLOP/byte": round(p["peak_flops"] / p["bandwidth"])}
        for name, p in PUBLISHED.items()
    ]  # fmt: skip
    return {"matmuls": mm, "bandwidth": st, "published": published}


def figures(record: dict, matmuls: list[dict]) -> dict:
    peak, bw, knee = (
        record["peak_matmul_flops"],
        record["bandwidth_bytes_per_s"],
        record["knee_flop_per_byte"],
    )
    xs = sorted({0.25, knee, 4 * max(r["intensity"] for r in matmuls)})
    xs = [x for x in xs if x > 0]
    roof = "roofline: min(peak, bandwidth × I)"
    series = {roof: [(x, min(peak, bw * x)) for x in xs]}
    for name in sorted({r["dtype"] for r in matmuls}):
        pts = sorted(
            (r["intensity"], r["median"]) for r in matmuls if r["dtype"] == name
        )
        series[f"matmuls, {name} (measured)"] = pts
    series = {k: [(x, y / 1e9) for x, y in v] for k, v in series.items()}
    chart = line_chart(
        series,
        title="Roofline of this machine, and its matmuls under it",
        x_label="arithmetic intensity (FLOP/byte)",
        y_label="GFLOP/s",
        log_x=True,
        log_y=True,
        note=Note(f"knee: {knee:.1f} FLOP/byte", roof, knee),
        description="Measured matmul FLOP/s against intensity under the measured roof.",
    )
    return {"roofline": chart}


if __name__ == "__main__":
    raise SystemExit(main_entry(main, SPEC))
