"""``python -m snippets``: list, run, run-all, bench, size, view, exercise.

    python -m snippets list
    python -m snippets run NAME [-n N] [--backend auto|gloo|nccl] [--timeout S]
    python -m snippets run-all [--force] [--only NAME ...] [--observing] [--results DIR]
                               [--per-snippet-timeout S] [--jobs J] [--keep-going]
    python -m snippets bench NAME [its own options]
    python -m snippets size [--preset NAME | shape] [parallelism] [--json]
    python -m snippets exercise list | start NAME | check NAME FILE | solution NAME
    python -m snippets view package.module:factory [--input-shape 1,128 | --example
                            package.module:inputs] [--out DIR] [--open]

Snippets and benchmarks are found by :mod:`snippets.tools.registry`, and ``run-all``
lives in :mod:`snippets.tools.run_all`. Every number an option takes is checked by the
parser, so bad input is one line and exit status 2.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from snippets.core.cli import (
    OneLineParser,
    add_run_arguments,
    bench_program,
    guarded,
    positive_float,
    positive_int,
    program_parser,
    snippet_options,
)
from snippets.core.runtime import choose_backend, run, under_torchrun
from snippets.tools import registry
from snippets.tools.run_all import DEFAULT_RESULTS, check_writable, run_all


def cmd_list(opts: argparse.Namespace) -> int:
    if opts.blocks:
        return list_blocks()
    rows = []
    for name, entry in registry.snippets_by_name().items():
        notes = ", ".join(str(p) for p in registry.notes_embedding(name)) or "-"
        spec = entry.spec
        rows.append((name, str(spec.world_size), spec.needs, notes, spec.summary))
    for bench in registry.bench_modules():
        how = f"python -m snippets bench {bench} --help"
        rows.append((f"bench {bench}", "-", "cpu", "-", how))
    header = ("snippet", "ranks", "needs", "note", "what it shows")
    widths = [max(len(r[i]) for r in rows + [header]) for i in range(4)]
    for row in [header] + rows:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths)) + "  " + row[4])
    blocks = registry.building_blocks()
    print(
        f"\n{len(blocks)} more modules are building blocks, not snippets: the snippets "
        "above import them.\n'python -m snippets list --blocks' names each and the "
        "snippet that runs it."
    )
    return 0


def list_blocks() -> int:
    """The modules without SPEC (outside core), each with the snippets built on it."""
    rows = [
        (name, ", ".join(runners) or "none")
        for name, runners in sorted(registry.building_blocks().items())
    ]
    header = ("building block", "runs in (python -m snippets run NAME)")
    width = max(len(r[0]) for r in rows + [header])
    for name, runners in [header] + rows:
        print(f"{name.ljust(width)}  {runners}")
    return 0


def cmd_run(opts: argparse.Namespace) -> int:
    if opts.name is None:  # ``run --help``, or a name forgotten
        if opts.help:
            opts.parser.print_help()
            return 0
        opts.parser.error("the following arguments are required: name")
    entry = registry.snippet(opts.name)
    spec = entry.spec
    prog = f"python -m snippets run {entry.name}"
    if opts.help:  # the runner's options and the snippet's own, in one list
        parser = program_parser(entry.module, prog)
        add_out_argument(parser)
        parser.print_help()
        return 0
    if under_torchrun():
        n = int(os.environ["WORLD_SIZE"])
    else:
        n = spec.world_size if opts.nproc is None else opts.nproc
    backend = choose_backend(opts.backend, n)  # checked even for a single process
    if opts.out:
        check_writable(Path(opts.out).parent)
    options = snippet_options(entry.module, opts.rest, prog)
    result = run(entry.module.main, spec, n, backend, opts.timeout, options)
    if opts.out and int(os.environ.get("RANK", "0")) == 0:
        distributed = spec.world_size > 1 or n > 1 or under_torchrun()
        shown = backend if distributed else "none"
        record = {"result": result, "backend": shown, "world_size": n}
        Path(opts.out).write_text(json.dumps(record, default=str), encoding="utf-8")
    return 0


def cmd_bench(opts: argparse.Namespace) -> int:
    module = registry.bench(opts.name)
    if callable(getattr(module, "bench", None)):  # attention: a sweep of its own
        return module.bench(opts.args)
    return bench_program(module, opts.name, opts.args)


def add_out_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", help="also write rank 0's result as JSON here")


def cmd_size(opts: argparse.Namespace) -> int:
    from snippets.sizing.size_cli import size

    return size(opts.rest)  # every option after ``size`` is the calculator's


def cmd_view(opts: argparse.Namespace) -> int:
    from snippets.viewer.view_cli import view

    return view(opts.rest)  # every option after ``view`` is the viewer's


def cmd_exercise(opts: argparse.Namespace) -> int:
    from snippets.exercises.exercise_cli import main as exercise

    return exercise(opts.rest)  # every option after ``exercise`` is its own


def build_parser() -> OneLineParser:
    parser = OneLineParser(
        prog="python -m snippets", description="Run the snippets behind the notes."
    )
    sub = parser.add_subparsers(
        dest="command", required=True, parser_class=OneLineParser
    )
    p = sub.add_parser("list", help="every snippet, its note, ranks and needs")
    p.add_argument(
        "--blocks",
        action="store_true",
        help="the building blocks instead: modules the snippets import, not run alone",
    )
    p.set_defaults(fn=cmd_list)
    p = sub.add_parser(
        "run", help="run one snippet and print its self-check", add_help=False
    )
    p.add_argument("name", nargs="?")
    p.add_argument(
        "-h",
        "--help",
        action="store_true",
        help="show this help, with the snippet's own options after its name",
    )
    add_run_arguments(p)
    add_out_argument(p)
    p.set_defaults(fn=cmd_run, parser=p)
    p = sub.add_parser("run-all", help="run every snippet; write results/ for notes")
    p.add_argument("--force", action="store_true", help="rerun unchanged code too")
    p.add_argument("--only", nargs="+", metavar="NAME", help="run just these")
    p.add_argument(
        "--observing",
        action="store_true",
        help="just the snippets that check an observation (with --only: of those)",
    )
    p.add_argument("--backend", default="auto", help="auto (default), gloo or nccl")
    p.add_argument(
        "--results", default=str(DEFAULT_RESULTS), help="where to write (results/)"
    )
    p.add_argument(
        "--per-snippet-timeout", type=positive_float, default=600.0, metavar="S"
    )
    p.add_argument(
        "--jobs",
        type=positive_int,
        default=2,
        metavar="J",
        help="untimed snippets run this many at a time (default 2)",
    )
    p.add_argument(
        "--keep-going",
        action="store_true",
        help="exit 0 when a snippet fails; the notes show what failed (make serve)",
    )
    p.set_defaults(fn=run_all)
    p = sub.add_parser("bench", help="benchmarks: ours beside torch's, in one run")
    p.add_argument("name")
    p.add_argument("args", nargs="...", help="the benchmark's own options")
    p.set_defaults(fn=cmd_bench)
    p = sub.add_parser(
        "size", help="the sizing calculator: memory, FLOPs, traffic", add_help=False
    )
    p.set_defaults(fn=cmd_size)
    p = sub.add_parser(
        "view", help="draw a model: a page to expand, search and cut", add_help=False
    )
    p.set_defaults(fn=cmd_view)
    p = sub.add_parser(
        "exercise",
        help="write a concept yourself; the project's checks grade it",
        add_help=False,
    )
    p.set_defaults(fn=cmd_exercise)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    opts, rest = parser.parse_known_args(argv)
    if rest and opts.command not in ("run", "size", "view", "exercise"):
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    opts.rest = rest  # a snippet's own options, parsed once its name is known
    return guarded(lambda: opts.fn(opts))


if __name__ == "__main__":
    sys.exit(main())
