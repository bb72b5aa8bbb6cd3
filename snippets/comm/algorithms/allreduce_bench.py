"""Our all-reduces against torch's built-in on 4 ranks, and against the α-β-γ model.

A small sweep (``snippets.comm.collective.collective_sweep``) of every algorithm,
predicted twice from two fits made on the same ranks just before
(``snippets.comm.cost.cost_model``): the idle fit, a ping-pong between two ranks, and
the busy fit, a ring exchange with every rank sending at once. Then our ring
against the built-in at one large size on 2 and on all ranks, and what our input
handshake costs. Every ratio is ours ÷ built-in from one run, median and interquartile
range over interleaved rounds; a "fastest" is named only where the ranges separate.

    python -m snippets run allreduce_bench [--target-mib 64]   # 0: skip the target
    python -m snippets bench allreduce --help                  # the sweep on its own
"""

from __future__ import annotations

import argparse
from typing import Sequence

import torch.distributed as dist

from snippets.comm.algorithms import allreduce
from snippets.comm.algorithms.allreduce_claims import FITS, builtin_row, findings
from snippets.comm.collective.collective_sweep import (
    HEADER,
    handshake_cost,
    ring_target,
    sweep,
)
from snippets.comm.cost import cost_model
from snippets.comm.cost.cost_model import size_text
from snippets.core.charts import line_chart
from snippets.core.cli import main_entry, nonnegative_int
from snippets.core.runtime import Spec, print0

SPEC = Spec(
    timed=True,  # it measures time: run-all runs it alone
    summary="our all-reduces vs torch's built-in: time, busbw, and the α-β prediction",
    world_size=4,
    min_world_size=2,
)
SHOWN = ("ring", "double_tree", "halving_doubling")  # in the sweep's chart
FIT0 = "ping_pong"  # the idle fit: what the built-in's ring is held to


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--target-mib",
        type=nonnegative_int,
        default=64,
        help="size of the ring-vs-built-in check in MiB (default 64; 0: skip it)",
    )


def _label(r: dict) -> str:
    return r["algorithm"] if r["collective"] == "all_reduce" else r["collective"]


def time_row(r: dict) -> dict:
    return {
        "size": size_text(r["size_bytes"]),
        "algorithm": _label(r),
        "time (ms)": r["time_s"] * 1e3,
        "model, idle fit (ms)": r["predicted_ping_pong_s"] * 1e3,
        "model, busy fit (ms)": r["predicted_ring_s"] * 1e3,
    }


def ratio_row(r: dict) -> dict:
    return {
        "size": size_text(r["size_bytes"]),
        "algorithm": _label(r),
        "busbw (GB/s)": r["busbw"] / 1e9,
        "ours ÷ built-in": r["ratio"],
        "IQR": f"{r['ratio_lo']:.2f}–{r['ratio_hi']:.2f}",
        "CPU, ours ÷ built-in": r["cpu_s"] / r["builtin_cpu_s"],
    }


def gather_scatter_row(r: dict) -> dict:
    return {
        "size": size_text(r["size_bytes"]),
        "collective": r["collective"],
        "time (ms)": r["time_s"] * 1e3,
        "model, busy fit (ms)": r["predicted_ring_s"] * 1e3,
        "ours ÷ built-in": r["ratio"],
        "IQR": f"{r['ratio_lo']:.2f}–{r['ratio_hi']:.2f}",
    }


def best_row(records: list[dict], size: int) -> dict:
    """The fastest of ours at one size, named only if its interquartile range lies
    above every other's; otherwise every algorithm whose range reaches it."""
    at = sorted(
        (r for r in records if r["size_bytes"] == size), key=lambda r: -r["ratio"]
    )
    top = at[0]
    tied = [r["algorithm"] for r in at[1:] if r["ratio_hi"] >= top["ratio_lo"]]
    return {
        "size": size_text(size),
        "fastest of ours": top["algorithm"] if not tied else "no clear winner",
        "within its spread": ", ".join([top["algorithm"]] + tied),
        "its ratio to the built-in": top["ratio"],
        "IQR": f"{top['ratio_lo']:.2f}–{top['ratio_hi']:.2f}",
    }


def chart(records: list[dict], names: Sequence[str], title: str) -> dict:
    """Measured time per name and its prediction from the busy fit (dashed, the same
    colour), and the built-in's time."""
    series: dict[str, list] = {}
    model_of: dict[str, str] = {}
    for name in names:
        mine = [r for r in records if _label(r) == name]
        series[name] = [(r["size_bytes"], r["time_s"]) for r in mine]
        series[f"{name} (model)"] = [
            (r["size_bytes"], r["predicted_ring_s"]) for r in mine
        ]
        model_of[f"{name} (model)"] = name
        builtin = f"built-in {mine[0]['collective']} ({mine[0]['backend']})"
        series.setdefault(
            builtin, [(r["size_bytes"], r["builtin_time_s"]) for r in mine]
        )
    return line_chart(
        series,
        title=title,
        x_label="buffer size S (bytes)",
        y_label="seconds",
        log_x=True,
        log_y=True,
        model_of=model_of,
        description=f"{title}. Each algorithm's measured median time (solid) and the "
        "α-β-γ prediction from the busy (ring-exchange) fit (dashed, same colour).",
    )


def main(target_mib: int = 64) -> dict:
    p = dist.get_world_size()
    fit_sizes = [2**e for e in range(3, 24, 4)]  # 8 B … 8 MiB
    machines = {
        pattern: cost_model.measure_machine(fit_sizes, pattern=pattern)[0]
        for pattern in cost_model.PATTERNS
    }
    for pattern, m in machines.items():
        print0(
            f"{FITS[pattern]} fit ({pattern.replace('_', '-')}): α = "
            f"{m.alpha * 1e6:.1f} µs, β = {m.beta * 1e9:.3f} ns/B, γ = "
            f"{m.gamma * 1e9:.3f} ns/B"
        )
    print0(HEADER)
    small, large, names = (
        [4 << 10, 64 << 10],
        [1 << 20, 4 << 20],
        list(allreduce.ALGORITHMS),
    )
    # small calls are cheap: more rounds against the noise
    records = sweep("all_reduce", small, names, iters=15, machines=machines)
    records += sweep("all_reduce", large, names, iters=5, machines=machines)
    others = [
        r
        for c in ("all_gather", "reduce_scatter")
        for r in sweep(c, [64 << 10, 1 << 20, 4 << 20], ["ring"], 5, machines)
    ]
    sizes = [target_mib << 20] if target_mib else []
    target = [ring_target(s, q) for s in sizes for q in sorted({2, p})]
    target = [row for row in target if "IQR" in row]  # the ranks that took part
    tables = {
        "sweep": [time_row(r) for r in records],
        "ratios": [ratio_row(r) for r in records],
        "best": [best_row(records, s) for s in small + large],
        "builtin": [
            builtin_row([r for r in records if r["size_bytes"] == s], machines[FIT0])
            for s in small + large
        ],
        "target": target,
        "handshake": [handshake_cost(1 << 20)],
        "gather_scatter": [gather_scatter_row(r) for r in others],
    }
    for row in tables["best"]:
        within = row["within its spread"].split(", ")
        top = f"{within[0]} {row['its ratio to the built-in']:.2f} [{row['IQR']}]"
        rest = f"{len(within) - 1} more within its IQR" if within[1:] else "clear"
        print0(f"  {row['size']:>8} best of ours: {top}, {rest}")
    for row in target:
        print0(
            f"  ring at {row['size']} on {row['ranks']} ranks: "
            f"{row['ring ÷ built-in']:.2f} × the built-in's busbw (IQR {row['IQR']})"
        )
    figures = {
        "sweep_plot": chart(
            records, SHOWN, f"All-reduce on {p} ranks, measured and modelled"
        ),
        "gather_scatter_plot": chart(
            others,
            ("all_gather", "reduce_scatter"),
            f"All-gather and reduce-scatter on {p} ranks",
        ),
    }
    return {
        "records": records + others,
        "machines": {k: vars(m) for k, m in machines.items()},
        "tables": tables,
        "figures": figures,
        "markdown": {"findings": findings(records, machines, target)},
    }


if __name__ == "__main__":
    raise SystemExit(main_entry(main, SPEC))
