"""``python -m snippets``: list, run, run-all, bench.

    python -m snippets list
    python -m snippets run NAME [-n N] [--backend auto|gloo|nccl] [--timeout S]
    python -m snippets run-all [--force] [--only NAME ...] [--results DIR] [--per-snippet-timeout S]
    python -m snippets bench NAME [its own options]

``run-all`` runs each snippet in its own process (so one that hangs is killed with its ranks
after ``--per-snippet-timeout``), skips a snippet whose code is unchanged since its last good
run, and writes ``results/<name>.json`` and ``.md`` for the notes. It exits 1 naming every
snippet that failed and the note that embeds it.
"""

from __future__ import annotations

import difflib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from snippets.core import registry
from snippets.core import results as _results
from snippets.core.cli import OneLineParser, add_run_arguments, guarded, snippet_options
from snippets.core.runtime import (
    UsageError,
    choose_backend,
    describe_device,
    gpu_count,
    run,
    under_torchrun,
)

DEFAULT_RESULTS = registry.REPO_DIR / "results"


def _entry(name: str) -> registry.Entry:
    found = registry.snippets_by_name()
    if name not in found:
        close = difflib.get_close_matches(name, found, n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise UsageError(
            f"unknown snippet {name!r}: {hint}'python -m snippets list' shows all {len(found)}"
        )
    return found[name]


def cmd_list(_opts) -> int:
    rows = []
    for name, entry in registry.snippets_by_name().items():
        notes = ", ".join(str(p) for p in registry.notes_embedding(name)) or "-"
        rows.append(
            (
                name,
                str(entry.spec.world_size),
                entry.spec.needs,
                notes,
                entry.spec.summary,
            )
        )
    for bench in registry.benches_by_name():
        rows.append(
            (
                f"bench {bench}",
                "-",
                "cpu",
                "-",
                "python -m snippets bench " + bench + " --help",
            )
        )
    header = ("snippet", "ranks", "needs", "note", "what it shows")
    widths = [max(len(r[i]) for r in rows + [header]) for i in range(4)]
    for row in [header] + rows:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths)) + "  " + row[4])
    return 0


def cmd_run(opts) -> int:
    entry = _entry(opts.name)
    spec = entry.spec
    n = (
        int(os.environ["WORLD_SIZE"])
        if under_torchrun()
        else (spec.world_size if opts.nproc is None else opts.nproc)
    )
    backend = choose_backend(
        opts.backend, n
    )  # checked even for a single-process snippet
    if opts.out:
        _check_writable(Path(opts.out).parent)
    options = snippet_options(
        entry.module, opts.rest, f"python -m snippets run {entry.name}"
    )
    result = run(entry.module.main, spec, n, backend, opts.timeout, options)
    if opts.out and int(os.environ.get("RANK", "0")) == 0:
        distributed = spec.world_size > 1 or n > 1 or under_torchrun()
        shown = backend if distributed else "none"
        record = {
            "result": result,
            "backend": shown,
            "world_size": n,
            "device": describe_device(shown),
        }
        Path(opts.out).write_text(json.dumps(record, default=str), encoding="utf-8")
    return 0


def _check_writable(folder: Path) -> None:
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder):
            pass
    except OSError as exc:
        raise UsageError(
            f"cannot write results to {folder}: {exc.strerror or exc}; pass --results DIR"
        ) from None


def _run_one(
    entry: registry.Entry, results_dir: Path, backend: str, timeout_s: float
) -> tuple[bool, str]:
    """Run one snippet in a child process; write its results on success. Returns (ok, message)."""
    n = entry.spec.world_size
    command = f"python -m snippets run {entry.name}" + (f" -n {n}" if n > 1 else "")
    with tempfile.TemporaryDirectory(prefix="commonplace-run-") as tmp:
        out = Path(tmp) / "result.json"
        argv = [
            sys.executable,
            "-m",
            "snippets",
            "run",
            entry.name,
            "--backend",
            backend,
            "--out",
            str(out),
        ]
        start = time.monotonic()
        proc = subprocess.Popen(
            argv,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            cwd=registry.REPO_DIR,
            start_new_session=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        try:
            output, _ = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)  # the runner and every rank it spawned
            proc.communicate()
            return False, f"timed out after {timeout_s:.0f} s"
        if proc.returncode != 0:
            last = (
                output.strip().splitlines()[-1]
                if output.strip()
                else f"exit status {proc.returncode}"
            )
            return False, last
        ran = json.loads(out.read_text(encoding="utf-8"))
    # a snippet that starts its own ranks (SPEC world_size 1) says how they ran
    own = ran["result"].get("provenance", {}) if isinstance(ran["result"], dict) else {}
    record = {
        "name": entry.name,
        "command": command,
        "output": output,
        "result": ran["result"],
        "seconds": round(time.monotonic() - start, 2),
        "hash": _results.code_hash(entry.path, f"{backend}"),
        "provenance": _results.provenance(
            **{**{k: ran[k] for k in ("device", "backend", "world_size")}, **own}
        ),
    }
    _results.write(results_dir, entry.name, record)
    return True, f"{record['seconds']:.1f} s"


def cmd_run_all(opts) -> int:
    from tqdm import tqdm

    results_dir = Path(opts.results).resolve()
    _check_writable(results_dir)
    choose_backend(opts.backend, 1)
    entries = registry.snippets_by_name()
    for name in opts.only or []:
        _entry(name)
    chosen = [e for n, e in entries.items() if not opts.only or n in opts.only]
    failed, report = [], []
    bar = tqdm(chosen, desc="run-all", unit="snippet", file=sys.stderr, disable=None)
    for entry in bar:
        bar.set_postfix_str(entry.name)
        previous = _results.read(results_dir, entry.name)
        if entry.spec.needs == "gpu" and gpu_count() == 0:
            report.append(f"skipped {entry.name}: needs GPUs")
            continue
        if (
            not opts.force
            and previous
            and previous.get("hash") == _results.code_hash(entry.path, opts.backend)
        ):
            report.append(f"cached  {entry.name}")
            continue
        ok, message = _run_one(
            entry, results_dir, opts.backend, opts.per_snippet_timeout
        )
        report.append(f"{'ran    ' if ok else 'FAILED '} {entry.name}: {message}")
        if not ok:
            notes = (
                ", ".join(str(p) for p in registry.notes_embedding(entry.name))
                or "no note"
            )
            failed.append(f"{entry.name} ({notes}): {message}")
    bar.close()
    print("\n".join(report))
    if failed:
        print(
            f"error: {len(failed)} snippet(s) failed: " + "; ".join(failed),
            file=sys.stderr,
        )
        return 1
    return 0


def cmd_bench(opts) -> int:
    benches = registry.benches_by_name()
    if opts.name not in benches:
        raise UsageError(
            f"unknown benchmark {opts.name!r}: choose one of {', '.join(sorted(benches)) or 'none'}"
        )
    return benches[opts.name].bench(opts.args)


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(
        prog="python -m snippets", description="Run the snippets behind the notes."
    )
    sub = parser.add_subparsers(
        dest="command", required=True, parser_class=OneLineParser
    )
    sub.add_parser(
        "list", help="every snippet, its note, ranks and needs"
    ).set_defaults(fn=cmd_list)
    p = sub.add_parser("run", help="run one snippet and print its self-check")
    p.add_argument("name")
    add_run_arguments(p)
    p.add_argument("--out", help="also write rank 0's result as JSON here")
    p.set_defaults(fn=cmd_run)
    p = sub.add_parser(
        "run-all", help="run every snippet and write results/ for the notes"
    )
    p.add_argument(
        "--force", action="store_true", help="rerun even if the code is unchanged"
    )
    p.add_argument("--only", nargs="+", metavar="NAME", help="run just these snippets")
    p.add_argument("--backend", default="auto", help="auto (default), gloo or nccl")
    p.add_argument(
        "--results",
        default=str(DEFAULT_RESULTS),
        help="where to write (default: results/)",
    )
    p.add_argument("--per-snippet-timeout", type=float, default=600.0, metavar="S")
    p.set_defaults(fn=cmd_run_all)
    p = sub.add_parser(
        "bench", help="benchmarks: ours beside torch's built-in, in one run"
    )
    p.add_argument("name")
    p.add_argument("args", nargs="...", help="the benchmark's own options")
    p.set_defaults(fn=cmd_bench)
    opts, rest = parser.parse_known_args(argv)
    if rest and opts.command != "run":
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    opts.rest = rest  # a snippet's own options, parsed once its name is known
    return guarded(lambda: opts.fn(opts))


if __name__ == "__main__":
    sys.exit(main())
