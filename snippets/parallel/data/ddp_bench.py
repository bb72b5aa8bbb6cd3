"""``python -m snippets bench ddp``: our DDP against torch's DDP and our ZeRO-3 against
FSDP2, step time on the tiny GPT, at each world size (``ddp_bench_timing``).

    python -m snippets bench ddp [--world-sizes 2 4] [--steps 5] [--repeats 5]
        [--bucket-cap-mb 25] [--pairs ddp zero3] [--backend gloo] [--json]
    torchrun --nproc-per-node 2 -m snippets bench ddp --json
    python -m snippets run ddp_bench      # 2 ranks: the table and verdicts of the note

Each world size is one fresh group of ranks; within it, ours and torch's take turns
step by step. A row gives both medians with their range over the repeats, ``ratio`` =
ours ÷ torch's median (the target for DDP: at most 1.05) with the lowest and highest
per-repeat ratio, the share of our all-reduce time hidden inside backward, and the
largest difference between the two sides' weights after training (same data).
``--json`` prints one record per (implementation, world size) instead of the table.
"""

from __future__ import annotations

import argparse
import json
import os
import textwrap

import torch.distributed as dist

from snippets.core.cli import (
    OneLineParser,
    guarded,
    main_entry,
    positive_float,
    positive_int,
)
from snippets.core.runtime import Spec, choose_backend, launch, print0, under_torchrun
from snippets.models.tiny_gpt import GPTConfig
from snippets.parallel.data import ddp_bench_timing as timing

BENCH = "ddp"
SPEC = Spec(
    timed=True,  # it measures time: run-all runs it alone
    summary="our DDP vs torch DDP, our ZeRO-3 vs FSDP2: step time",
    world_size=2,
)
TARGET = 1.05  # our DDP's step at most this many times torch's


HEADER = (
    f"{'ours':<6}{'ranks':>5}{'ours ms [min–max]':>18}{'torch ms [min–max]':>19}"
    f"{'ratio [min–max]':>17}{'cpu÷':>6}{'hidden':>7}{'max|Δ|':>9}"
)


def _spread(mid: float, lo: float, hi: float, digits: int = 1) -> str:
    """Median [min–max], like 68.6 [66.7–71.2]; at 100 and above, no decimals."""
    text = [f"{x:.{digits if x < 100 else 0}f}" for x in (mid, lo, hi)]
    return f"{text[0]} [{text[1]}–{text[2]}]"


def format_row(r: dict) -> str:
    ms = [
        _spread(*(r[f"{key}{part}_s"] * 1e3 for part in ("", "_min", "_max")))
        for key in ("step_time", "torch_step_time")
    ]
    ratio = _spread(r["ratio"], r["ratio_min"], r["ratio_max"], digits=2)
    hidden = "-" if r["hidden_fraction"] is None else f"{r['hidden_fraction']:.0%}"
    return (
        f"{r['impl']:<6}{r['world_size']:>5}{ms[0]:>18}{ms[1]:>19}{ratio:>17}"
        f"{r['cpu_ratio']:>6.2f}{hidden:>7}{r['max_abs_diff']:>9.1e}"
    )


def describe(cfg: GPTConfig, rows: int, steps: int, repeats: int) -> list[str]:
    legend = (
        "ddp: ours vs torch's DDP; zero3: ours vs FSDP2 (fully_shard). A step: "
        f"forward, backward, SGD. {repeats} repeats × {steps} steps of each, taking "
        "turns; ms: the median of the repeats' medians [their min–max]; ratio: ours "
        "÷ torch's [min–max of the per-repeat ratios]; cpu÷: ours ÷ torch's median "
        "CPU time of the main thread per step; hidden: our all-reduce time inside "
        "backward; max|Δ|: weights, ours vs torch's, after training."
    )
    return [
        f"tiny GPT L={cfg.n_layer} d={cfg.n_embd} N={cfg.block_size} "
        f"V={cfg.vocab_size}: {cfg.num_params():,} fp32 parameters, {rows} rows/rank",
        *textwrap.wrap(legend, width=88),
    ]


def verdict(r: dict) -> str:
    """One sentence from a record: the ratio, its spread, and what the spread allows."""
    ours = {"ddp": "our DDP", "zero3": "our ZeRO-3"}[r["impl"]]
    theirs = {"torch_ddp": "torch's DDP", "fsdp2": "FSDP2"}[r["baseline"]]
    lo, hi = r["ratio_min"], r["ratio_max"]
    if hi < 1:
        order = "faster in every repeat"
    elif lo > 1:
        order = "slower in every repeat"
    else:
        order = "the repeats do not separate the two"
    text = (
        f"At {r['world_size']} ranks a step of {ours} took {r['ratio']:.2f}× the time "
        f"of {theirs} ({lo:.2f}–{hi:.2f} over {r['repeats']} repeats): {order}"
    )
    if r["impl"] == "ddp":
        met = "within" if r["ratio"] <= TARGET else "over"
        text += f"; the median is {met} the {TARGET}× target"
        text += f"; {r['hidden_fraction']:.0%} of its all-reduce time was hidden"
    return text + "."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--steps", type=positive_int, default=5)
    parser.add_argument("--repeats", type=positive_int, default=5)
    parser.add_argument("--bucket-cap-mb", type=positive_float, default=25.0)


def parser() -> OneLineParser:
    found = OneLineParser(
        prog="python -m snippets bench ddp", description=__doc__.split("\n\n")[0]
    )
    found.add_argument(
        "--world-sizes",
        nargs="+",
        type=positive_int,
        default=[2, 4],
        metavar="N",
        help="ranks, one run each (default: 2 4; under torchrun: its world size)",
    )
    add_arguments(found)  # --steps, --repeats, --bucket-cap-mb
    found.add_argument(
        "--pairs",
        nargs="+",
        choices=tuple(timing.PAIRS),
        default=list(timing.PAIRS),
        help="ddp (vs torch's DDP), zero3 (vs FSDP2); default both",
    )
    found.add_argument("--backend", default="gloo", help="gloo (default) or nccl")
    found.add_argument(
        "--timeout",
        type=positive_float,
        default=120.0,
        metavar="S",
        help="process-group timeout in seconds (default 120)",
    )
    found.add_argument(
        "--json", action="store_true", help="one JSON record per (impl, world size)"
    )
    return found


def _rank(opts) -> list[dict]:
    run = timing.measure(
        opts.steps, opts.repeats, opts.bucket_cap_mb, tuple(opts.pairs)
    )
    return run["records"]  # the weights stay here: every rank agrees on the times


def bench(argv: list[str]) -> int:
    opts = parser().parse_args(argv)

    def body() -> int:
        sizes = (
            [int(os.environ["WORLD_SIZE"])] if under_torchrun() else opts.world_sizes
        )
        for n in sizes:  # a bad --backend, or nccl without GPUs: one line, now
            choose_backend(opts.backend, n)
        show = int(os.environ.get("RANK", "0")) == 0
        if show and not opts.json:
            lines = describe(timing.CFG, timing.ROWS, opts.steps, opts.repeats)
            print("\n".join(lines + [HEADER]), flush=True)
        for n in sizes:
            records = launch(_rank, n, opts.backend, opts.timeout, args=(opts,))[0]
            for r in records if show else []:
                print(json.dumps(r) if opts.json else format_row(r), flush=True)
        return 0

    return guarded(body)


def main(steps: int = 5, repeats: int = 5, bucket_cap_mb: float = 25.0) -> dict:
    records = timing.measure(steps, repeats, bucket_cap_mb)["records"]
    for line in describe(timing.CFG, timing.ROWS, steps, repeats) + [HEADER]:
        print0(line)
    for r in records:
        print0(format_row(r))
    print0()
    for r in records:
        print0(textwrap.fill(verdict(r), width=88))
    return {
        "records": records,
        "verdicts": [verdict(r) for r in records],
        "provenance": {
            "backend": dist.get_backend(),
            "world_size": records[0]["world_size"],
        },
    }


if __name__ == "__main__":
    raise SystemExit(main_entry(main, SPEC))
