"""Our all-reduces against torch's built-in, and against the α-β-γ model.

    python -m snippets run allreduce_bench [options]     # the note's run: 4 ranks
    python -m snippets bench allreduce [options]         # the same program
    torchrun --nproc-per-node 8 -m snippets bench allreduce --sizes 64M --json

Options: ``-n N``, ``--backend``, ``--timeout``, and ``--sizes 4K 64K 1M 4M``,
``--iters R`` (timed rounds; default 15 below 1 MiB, 5 from there), ``--collectives
all_reduce all_gather reduce_scatter``, ``--algorithms ring tree ...`` (a subset of
ours), ``--handshake``, ``--target-mib 64`` (0: skip the target), ``--json``.

First two fits of the machine on the same ranks (``snippets.comm.cost.cost_model``):
the idle fit, a ping-pong between two ranks, and the busy fit, a ring exchange with
every rank sending at once. Then a sweep (``snippets.comm.collective.collective_sweep``)
of every algorithm at every size, each checked against the built-in, then timed with it
in turns (``snippets.core.timing``), and predicted from both fits; all-gather and
reduce-scatter with our rings. Then our ring beside the built-in at one large size on
all the ranks (the 2-rank target at that size is ``ring_profile``'s, one run that both
notes include), and what our input handshake costs. A row gives the median time,
nccl-tests' busbw, and ours ÷ built-in in busbw (the built-in's time ÷ ours, round by
round: above 1, ours was faster) with its interquartile range; a "fastest" is named
only where the ranges separate. ``--json`` prints the sweep's records, one per line
and nothing else, with every round's times and the CPU seconds a rank spent per call
(all its threads: where ranks outnumber cores, wall time says when the scheduler let a
rank run, CPU time what the call cost). Our all-reduces are timed without their input
check across ranks (torch's built-in has none); ``--handshake`` keeps it.
"""

from __future__ import annotations

import argparse
import math
import re
from typing import Sequence

import torch.distributed as dist

from snippets.comm.algorithms import allreduce
from snippets.comm.algorithms.allreduce_claims import (
    FITS,
    builtin_row,
    findings,
    fit_errors,
    fit_row,
    fits_said,
)
from snippets.comm.collective.collective_sweep import (
    COLLECTIVES,
    HEADER,
    handshake_cost,
    per_rank_numel,
    ring_target,
    sweep,
)
from snippets.comm.cost import cost_model
from snippets.comm.cost.cost_model import size_text
from snippets.core.charts import Note, line_chart
from snippets.core.cli import (
    main_entry,
    nonnegative_int,
    positive_int,
)
from snippets.core.runtime import Spec, UsageError, print0

BENCH = "allreduce"
SPEC = Spec(
    timed=True,  # it measures time: run-all runs it alone
    summary="our all-reduces vs torch's built-in: time, busbw, and the α-β prediction",
    world_size=4,
    min_world_size=2,
)
DEFAULT_SIZES = ("4K", "64K", "1M", "4M")
SHOWN = ("ring", "double_tree", "halving_doubling")  # in the sweep's chart
FIT0 = "ping_pong"  # the idle fit: what the built-in's ring is held to


def parse_size(text: str) -> int:
    """'4096', '64K', '1M', '64MiB', '1G' → bytes (K = 1024, as nccl-tests counts)."""
    found = re.fullmatch(r"(\d+)\s*([KMG]?)(?:I?B)?", text.strip(), flags=re.I)
    if not found:
        raise argparse.ArgumentTypeError(
            f"size {text!r} is not a number of bytes like 4096, 64K, 1M or 1G"
        )
    value = int(found[1]) * 1024 ** " KMG".index(found[2].upper() or " ")
    if value < 4:
        raise argparse.ArgumentTypeError(
            f"size {text!r} is under one float32 (4 bytes)"
        )
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--sizes",
        nargs="+",
        type=parse_size,
        default=[parse_size(s) for s in DEFAULT_SIZES],
        metavar="SIZE",
        help=f"buffer sizes (default: {' '.join(DEFAULT_SIZES)})",
    )
    parser.add_argument(
        "--iters",
        type=positive_int,
        default=None,
        help="timed rounds per point (default: 15 below 1 MiB, 5 from 1 MiB)",
    )
    parser.add_argument(
        "--collectives",
        nargs="+",
        choices=COLLECTIVES,
        default=list(COLLECTIVES),
        help="what to sweep (default: all three; all_gather, reduce_scatter: rings)",
    )
    parser.add_argument(
        "--algorithms",
        nargs="+",
        choices=tuple(allreduce.ALGORITHMS),
        default=None,
        metavar="NAME",
        help="a subset of our all-reduces (default: all)",
    )
    parser.add_argument(
        "--handshake",
        action="store_true",
        help="keep our all-reduces' input check across ranks (torch's has none)",
    )
    parser.add_argument(
        "--target-mib",
        type=nonnegative_int,
        default=64,
        help="size of the ring-vs-built-in check in MiB (default 64; 0: skip it)",
    )
    parser.add_argument(
        "--json",
        dest="as_json",
        action="store_true",
        help="only the sweep's records, one JSON object per line",
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
        "ours ÷ built-in": r["speedup"],
        "IQR": f"{r['speedup_lo']:.2f}–{r['speedup_hi']:.2f}",
        "CPU, ours ÷ built-in": r["cpu_ratio"],
    }


def gather_scatter_row(r: dict) -> dict:
    return {
        "size": size_text(r["size_bytes"]),
        "collective": r["collective"],
        "time (ms)": r["time_s"] * 1e3,
        "model, busy fit (ms)": r["predicted_ring_s"] * 1e3,
        "ours ÷ built-in": r["speedup"],
        "IQR": f"{r['speedup_lo']:.2f}–{r['speedup_hi']:.2f}",
    }


def best_row(records: list[dict], size: int) -> dict:
    """The fastest of ours at one size, named only if its interquartile range lies
    above every other's; otherwise every algorithm whose range reaches it."""
    at = sorted(
        (r for r in records if r["size_bytes"] == size), key=lambda r: -r["speedup"]
    )
    top = at[0]
    tied = [r["algorithm"] for r in at[1:] if r["speedup_hi"] >= top["speedup_lo"]]
    return {
        "size": size_text(size),
        "fastest of ours": top["algorithm"] if not tied else "no clear winner",
        "within its spread": ", ".join([top["algorithm"]] + tied),
        "its ratio to the built-in": top["speedup"],
        "IQR": f"{top['speedup_lo']:.2f}–{top['speedup_hi']:.2f}",
    }


def farthest_from_model(records: list[dict], names: Sequence[str]) -> Note | None:
    """The measured point furthest from its prediction (as a ratio, either way)."""
    mine = [
        r
        for r in records
        if _label(r) in names and min(r["time_s"], r["predicted_ring_s"]) > 0
    ]
    if not mine:
        return None
    r = max(mine, key=lambda r: abs(math.log(r["time_s"] / r["predicted_ring_s"])))
    ratio = r["time_s"] / r["predicted_ring_s"]
    return Note(f"{ratio:.2g}× its model's time", _label(r), r["size_bytes"])


def chart(records: list[dict], names: Sequence[str], title: str) -> dict:
    """Measured time per name and its prediction from the busy fit (dashed, the same
    colour), and the built-in's time; a note where a measurement is furthest from
    its model."""
    series: dict[str, list] = {}
    model_of: dict[str, str] = {}
    for name in names:
        mine = [r for r in records if _label(r) == name]
        if not mine:  # not swept this run
            continue
        series[name] = [(r["size_bytes"], r["time_s"]) for r in mine]
        series[f"{name} (model)"] = [
            (r["size_bytes"], r["predicted_ring_s"]) for r in mine
        ]
        model_of[f"{name} (model)"] = name
        builtin = f"built-in {mine[0]['collective']} ({mine[0]['backend']})"
        series.setdefault(
            builtin, [(r["size_bytes"], r["baseline_time_s"]) for r in mine]
        )
    return line_chart(
        series,
        title=title,
        x_label="buffer size S (bytes)",
        y_label="seconds",
        log_x=True,
        log_y=True,
        x_unit="B",
        y_unit="s",
        model_of=model_of,
        note=farthest_from_model(records, names),
        description=f"{title}. Each algorithm's measured median time (solid) and the "
        "α-β-γ prediction from the busy (ring-exchange) fit (dashed, same colour).",
    )


def rounds_for(size: int, iters: int | None) -> int:
    """Small calls are cheap: more rounds against the noise."""
    return iters or (15 if size < 1 << 20 else 5)


def main(
    sizes: Sequence[int] = tuple(parse_size(s) for s in DEFAULT_SIZES),
    iters: int | None = None,
    collectives: Sequence[str] = COLLECTIVES,
    algorithms: Sequence[str] | None = None,
    handshake: bool = False,
    target_mib: int = 64,
    as_json: bool = False,
) -> dict:
    p, say = dist.get_world_size(), (lambda *a: None) if as_json else print0
    for c in collectives:
        if small := [s for s in sizes if per_rank_numel(c, s, p) == 0]:
            raise UsageError(
                f"--sizes: {small[0]} B is too small for {c} on {p} ranks: "
                f"at least {4 * p} B"
            )
    fit_sizes = [2**e for e in range(3, 24, 4)]  # 8 B … 8 MiB
    fitted = {
        pattern: cost_model.measure_machine(fit_sizes, pattern=pattern)
        for pattern in cost_model.PATTERNS
    }
    machines = {pattern: m for pattern, (m, _) in fitted.items()}
    fit_lines = [  # what the note shows: the two fits the sweep is predicted from
        f"{FITS[pattern]} fit ({pattern.replace('_', '-')}): α = "
        f"{m.alpha * 1e6:.1f} µs, β = {m.beta * 1e9:.3f} ns/B, γ = "
        f"{m.gamma * 1e9:.3f} ns/B"
        for pattern, m in machines.items()
    ]
    for line in fit_lines:
        say(line)
    say(HEADER)
    records, others = [], []
    for c in collectives:
        names = (
            (algorithms or list(allreduce.ALGORITHMS))
            if c == "all_reduce"
            else ["ring"]
        )
        for s in sizes:
            found = sweep(c, [s], names, rounds_for(s, iters), machines, as_json,
                          handshake)  # fmt: skip
            (records if c == "all_reduce" else others).extend(found)
    swept = sorted({r["size_bytes"] for r in records})
    samples = {pattern: raw for pattern, (_, raw) in fitted.items()}
    fits = fit_errors(machines, samples, records) if records else []
    targets = [target_mib << 20] if target_mib else []
    target = [ring_target(s, p) for s in targets]
    tables = {
        "sweep": [time_row(r) for r in records],
        "ratios": [ratio_row(r) for r in records],
        "best": [best_row(records, s) for s in swept],
        "builtin": [
            builtin_row([r for r in records if r["size_bytes"] == s], machines[FIT0])
            for s in swept
        ],
        "target": target,
        "fits": [fit_row(f) for f in fits],  # each: its own points, the all-reduces
        "handshake": [handshake_cost(1 << 20)] if records else [],
        "gather_scatter": [gather_scatter_row(r) for r in others],
    }
    for row in tables["best"]:
        within = row["within its spread"].split(", ")
        top = f"{within[0]} {row['its ratio to the built-in']:.2f} [{row['IQR']}]"
        rest = f"{len(within) - 1} more within its IQR" if within[1:] else "clear"
        say(f"  {row['size']:>8} best of ours: {top}, {rest}")
    for row in target:
        say(
            f"  ring at {row['size']} on {row['ranks']} ranks: "
            f"{row['ring ÷ built-in']:.2f} × the built-in's busbw (IQR {row['IQR']})"
        )
    figures, title = {}, f"on {p} ranks"
    if records:
        title_ar = f"All-reduce {title}, measured and modelled"
        figures["sweep_plot"] = chart(records, SHOWN, title_ar)
    if others:
        title_gs = f"All-gather and reduce-scatter {title}"
        figures["gather_scatter_plot"] = chart(
            others, ("all_gather", "reduce_scatter"), title_gs
        )
    findings_md = {"findings": findings(records, machines, target)} if records else {}
    if fits:
        findings_md["fits_said"] = " ".join(fits_said(fits))
    return {
        "records": records + others,
        "machines": {k: vars(m) for k, m in machines.items()},
        "tables": {name: rows for name, rows in tables.items() if rows},
        "figures": figures,
        "markdown": findings_md,
        "excerpts": {"fits": fit_lines},
    }


if __name__ == "__main__":
    raise SystemExit(main_entry(main, SPEC))
