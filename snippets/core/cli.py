"""The command line every snippet shares: one-line usage errors, exit codes, options.

A snippet's own options are declared in its ``add_arguments(parser)`` and validated by
the parser itself (``positive_int``, ``positive_float``, ...), so bad input is refused
before any rank starts: one line on stderr, exit status 2, no traceback.
"""

from __future__ import annotations

import argparse
import math
import sys
from typing import Any, Callable

from snippets.core.runtime import RankError, Spec, UsageError, run


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-n",
        "--nproc",
        type=positive_int,
        default=None,
        metavar="N",
        help="number of ranks (default: the snippet's own)",
    )
    parser.add_argument(
        "--backend", default="auto", help="auto (default), gloo or nccl"
    )
    parser.add_argument(
        "--timeout",
        type=positive_float,
        default=None,
        metavar="S",
        help="process-group timeout in seconds",
    )


def _number(text: str, kind: type, least: float, strict: bool) -> Any:
    try:
        value = kind(text)
    except ValueError:
        what = "a whole number" if kind is int else "a number"
        raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
    if kind is float and not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
    if value < least or (strict and value == least):
        bound = "greater than" if strict else "at least"
        raise argparse.ArgumentTypeError(f"must be {bound} {least:g}, got {value:g}")
    return value


# Every option that takes a number uses one of these as its argparse ``type=``, so bad
# input is refused by the parser (a test walks every parser and holds them to it).
def positive_int(text: str) -> int:
    """A count: a whole number ≥ 1."""
    return _number(text, int, 1, strict=False)


def nonnegative_int(text: str) -> int:
    """A whole number ≥ 0 (0 often means "skip" or "none")."""
    return _number(text, int, 0, strict=False)


def positive_float(text: str) -> float:
    """A finite number > 0: a size, a time, a rate."""
    return _number(text, float, 0, strict=True)


def nonnegative_float(text: str) -> float:
    """A finite number ≥ 0."""
    return _number(text, float, 0, strict=False)


class OneLineParser(argparse.ArgumentParser):
    """argparse, but a usage mistake is one line on stderr and exit status 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"error: {message} (see --help)\n")


def guarded(body: Callable[[], int]) -> int:
    """The two expected failures as exit codes: 2 for bad input, 1 for a failed rank."""
    try:
        return body()
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except RankError as exc:
        if exc.usage is not None:  # a rank refused bad input: the same one line
            print(f"error: {exc.usage}", file=sys.stderr)
            return 2
        for line in exc.remote_traceback.rstrip().splitlines():
            print(f"[rank {exc.rank}] {line}", file=sys.stderr)
        for rank, stack in sorted(exc.stacks.items()):  # where the others were
            print(
                f"[rank {rank}] where it was when rank {exc.rank} failed:",
                file=sys.stderr,
            )
            for line in stack.rstrip().splitlines():
                print(f"[rank {rank}] {line}", file=sys.stderr)
        # one last line, as run-all and a reader's eye take it: the cause, and why
        head = f"rank {exc.rank} failed: {exc.cause}"
        print(
            f"error: {head}" + (f"; {exc.reason}" if exc.reason else ""),
            file=sys.stderr,
        )
        return 1
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130


def snippet_options(module: Any, argv: list[str], prog: str) -> dict:
    """A snippet's own options: it may define ``add_arguments(parser)``; the parsed
    values are passed to ``main`` as keyword arguments."""
    parser = OneLineParser(prog=prog)
    if hasattr(module, "add_arguments"):
        module.add_arguments(parser)
    return vars(parser.parse_args(argv))


def program_parser(module: Any, prog: str) -> OneLineParser:
    """One parser for a module's whole command line: the runner's options (``-n``,
    ``--backend``, ``--timeout``) where it has a SPEC, then its own
    (``add_arguments``). ``bench NAME`` parses with it, and ``run NAME --help`` shows
    it, so both doors list the same options."""
    spec = getattr(module, "SPEC", None)
    summary = spec.summary if spec else (module.__doc__ or "").split("\n")[0]
    parser = OneLineParser(prog=prog, description=summary)
    if spec is not None:
        add_run_arguments(parser)
    if hasattr(module, "add_arguments"):
        module.add_arguments(parser)
    return parser


def bench_program(module: Any, name: str, argv: list[str]) -> int:
    """``python -m snippets bench NAME``: the benchmark's one program, the one ``python
    -m snippets run <its module>`` runs. Its options are parsed before any rank
    starts, and ``run`` checks them (``check_options``) before it launches; then its
    ``main(**options)`` runs on the ranks its SPEC asks for. A benchmark without SPEC
    is no snippet (it needs what run-all does not have, a browser): its ``main`` runs
    in this process."""
    parser = program_parser(module, f"python -m snippets bench {name}")
    opts = vars(parser.parse_args(argv))
    spec = getattr(module, "SPEC", None)

    def body() -> int:
        if spec is None:
            module.main(**opts)
        else:
            ranks = (opts.pop(k) for k in ("nproc", "backend", "timeout"))
            run(module.main, spec, *ranks, opts)
        return 0

    return guarded(body)


def main_entry(main: Callable[..., Any], spec: Spec) -> int:
    """What ``python -m snippets.<name>`` (and torchrun ``-m``) calls."""
    parser = OneLineParser(description=spec.summary)
    add_run_arguments(parser)
    opts, rest = parser.parse_known_args()
    options = snippet_options(sys.modules[main.__module__], rest, parser.prog)

    def body() -> int:
        run(main, spec, opts.nproc, opts.backend, opts.timeout, options)
        return 0

    return guarded(body)
