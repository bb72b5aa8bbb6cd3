"""``python -m snippets bench allreduce``: our collectives beside torch's, as a table.

    python -m snippets bench allreduce [-n N] [--sizes 4K 1M 64M] [--iters I] [--json]
        [--collective all_reduce|all_gather|reduce_scatter]
        [--algorithms ring tree ...] [--backend gloo|nccl] [--handshake]
    torchrun --nproc-per-node 8 -m snippets bench allreduce --sizes 64M --json

Each (algorithm, size) is checked against the built-in, then timed alternately with it
(``snippets.comm.collective.collective_sweep``). A row gives the median time,
nccl-tests' busbw, and ours ÷ built-in: the median over rounds of the built-in's time ÷
ours (above 1: ours was faster) with its interquartile range. ``--json`` prints one
record per line, with the CPU seconds a rank spent per call (``cpu_s``,
``builtin_cpu_s``): where ranks outnumber cores, wall time says when the scheduler let a
rank run, CPU time what the call cost. Our all-reduces are timed without their input
check across ranks (torch's built-in has none); ``--handshake`` keeps it.
"""

from __future__ import annotations

import argparse
import os
import re

from snippets.comm.collective.collective_sweep import (
    COLLECTIVES,
    HEADER,
    algorithms,
    per_rank_numel,
    sweep,
)
from snippets.core.cli import OneLineParser, add_run_arguments, positive_int
from snippets.core.runtime import choose_backend, launch, under_torchrun

BENCH = "allreduce"
DEFAULT_SIZES = ["4K", "64K", "1M", "16M", "64M"]


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


def _run_bench(opts: argparse.Namespace) -> list[dict]:
    return sweep(
        opts.collective,
        opts.sizes,
        opts.algorithms,
        opts.iters,
        as_json=opts.json,
        handshake=opts.handshake,
    )


def parser() -> OneLineParser:
    found = OneLineParser(
        prog="python -m snippets bench allreduce",
        description=__doc__.split("\n\n")[0],
    )
    add_run_arguments(found)
    found.add_argument(
        "--sizes",
        nargs="+",
        type=parse_size,
        default=[parse_size(s) for s in DEFAULT_SIZES],
        metavar="SIZE",
        help=f"buffer sizes (default: {' '.join(DEFAULT_SIZES)})",
    )
    found.add_argument("--collective", choices=COLLECTIVES, default="all_reduce")
    found.add_argument(
        "--algorithms",
        nargs="+",
        metavar="NAME",
        help="a subset of ours (default: all)",
    )
    found.add_argument(
        "--iters",
        type=positive_int,
        default=5,
        help="timed rounds per size (default 5)",
    )
    found.add_argument(
        "--json", action="store_true", help="one JSON record per (algorithm, size)"
    )
    found.add_argument(
        "--handshake",
        action="store_true",
        help="keep our all-reduces' input check across ranks (torch's has none)",
    )
    return found


def bench(argv: list[str]) -> int:
    args = parser()
    opts = args.parse_args(argv)
    n = (
        int(os.environ["WORLD_SIZE"])
        if under_torchrun()
        else (4 if opts.nproc is None else opts.nproc)
    )
    if n < 2:
        args.error(f"-n must be at least 2 (a collective needs company), got {n}")
    for size in opts.sizes:
        if per_rank_numel(opts.collective, size, n) == 0:
            args.error(
                f"--sizes: {size} B is too small for {opts.collective} on {n} ranks: "
                f"at least {4 * n} B"
            )
    known = list(algorithms(opts.collective))
    opts.algorithms = opts.algorithms or known
    if unknown := [a for a in opts.algorithms if a not in known]:
        args.error(
            f"--algorithms: unknown {unknown[0]!r} for {opts.collective}: "
            f"choose from {', '.join(known)}"
        )
    choose_backend(opts.backend, n)  # a bad --backend fails here, before any output
    if not opts.json and int(os.environ.get("RANK", "0")) == 0:
        print(HEADER, flush=True)
    launch(_run_bench, n, opts.backend, opts.timeout or 120.0, args=(opts,))
    return 0
