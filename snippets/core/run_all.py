"""``python -m snippets run-all``: run every snippet once, in its own process, and
write ``results/`` for the notes.

Each snippet runs as ``python -m snippets run NAME --out FILE`` in a fresh process
session, so one that hangs is killed with all its ranks after ``--per-snippet-timeout``.
A snippet is not rerun while its code (its whole import closure, see
:func:`snippets.core.results.code_hash`) and the results of other snippets it reads
(``SPEC.reads``, see :func:`snippets.core.results.cache_key`) are what they were at
its last good run on the same backend. The snippets it reads run before it;
snippets that report times run alone; the others run ``--jobs`` at a time. The run
exits 1 naming every snippet that failed and the note that embeds it.
"""

from __future__ import annotations

import argparse
import difflib
import graphlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any, Callable

from snippets.core import registry, results
from snippets.core.errors import UsageError
from snippets.core.runtime import choose_backend, gpu_count

DEFAULT_RESULTS = registry.REPO_DIR / "results"


def check_writable(folder: Path) -> None:
    """Refuse, before running anything, a results folder that cannot be written."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder):
            pass
    except OSError as exc:
        raise UsageError(
            f"cannot write results to {folder}: {exc.strerror or exc}; "
            "pass --results DIR"
        ) from None


def _last_line(output: str, returncode: int) -> str:
    lines = output.strip().splitlines()
    return lines[-1] if lines else f"exit status {returncode}"


def run_child(name: str, backend: str, timeout_s: float) -> tuple[dict | None, str]:
    """``python -m snippets run NAME`` in a fresh process session: what it wrote to
    ``--out`` and its output, or None and why it failed."""
    with tempfile.TemporaryDirectory(prefix="commonplace-run-") as tmp:
        out = Path(tmp) / "result.json"
        argv = [sys.executable, "-m", "snippets", "run", name]
        argv += ["--backend", backend, "--out", str(out)]
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
            return None, f"timed out after {timeout_s:.0f} s"
        if proc.returncode != 0:
            return None, _last_line(output, proc.returncode)
        return json.loads(out.read_text(encoding="utf-8")), output


def run_one(
    entry: registry.Entry, results_dir: Path, backend: str, timeout_s: float
) -> tuple[bool, str]:
    """Run one snippet in a child process; write its results if it passed.
    Returns (ok, message)."""
    n = entry.spec.world_size
    command = f"python -m snippets run {entry.name}" + (f" -n {n}" if n > 1 else "")
    start = time.monotonic()
    ran, output = run_child(entry.name, backend, timeout_s)
    if ran is None:
        return False, output
    # a snippet that starts its own ranks (SPEC world_size 1) says how they ran
    value = ran["result"]
    own = value.get("provenance", {}) if isinstance(value, dict) else {}
    seen = {k: ran[k] for k in ("device", "backend", "world_size")}
    record = {
        "name": entry.name,
        "command": command,
        "output": output,
        "result": value,
        "seconds": round(time.monotonic() - start, 2),
        # the results it read are those its producers left (they ran before it)
        "hash": results.cache_key(entry.path, backend, results_dir, entry.spec.reads),
        "provenance": results.provenance(**{**seen, **own}),
    }
    results.write(results_dir, entry.name, record)
    return True, f"{record['seconds']:.1f} s"


def producers_first(entries: dict[str, registry.Entry]) -> list[str]:
    """Every name, each after the snippets whose results it reads (``SPEC.reads``).

    A name in ``reads`` that is no snippet, or snippets that read each other's results
    round in a circle, are a one-line error."""
    for name, entry in entries.items():
        reads = entry.spec.reads
        if isinstance(reads, str) or not all(isinstance(r, str) for r in reads):
            raise UsageError(
                f"{name}: SPEC reads={reads!r} must be a tuple of snippet names, "
                "e.g. reads=('cost_model',)"
            )
        for read in reads:
            if read not in entries or read == name:
                close = difflib.get_close_matches(read, set(entries) - {name}, n=1)
                hint = f"; did you mean {close[0]!r}?" if close else ""
                what = "itself" if read == name else f"{read!r}, which is no snippet"
                raise UsageError(f"{name}: SPEC reads the results of {what}{hint}")
    graph = {name: tuple(e.spec.reads) for name, e in entries.items()}
    try:
        return list(graphlib.TopologicalSorter(graph).static_order())
    except graphlib.CycleError as exc:
        names = list(reversed(exc.args[1]))[1:]  # each reads the next, round
        first = names.index(min(names))
        circle = " reads ".join(names[first:] + names[: first + 1])
        raise UsageError(
            f"snippets read each other's results in a circle: {circle}; "
            "drop one name from a SPEC's reads"
        ) from None


def run_in_order(entries: list, jobs: int, one: Callable, show: Callable) -> None:
    """``one(entry)`` for every entry, none before the entries named in its
    ``SPEC.reads`` have finished. Timed entries run first whenever one is ready, with
    nothing beside them; the others run up to ``jobs`` at a time."""
    waiting = list(entries)
    names = {e.name for e in entries}
    done: set[str] = set()
    running: dict[Future, Any] = {}
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        while waiting or running:
            ready = [
                e
                for e in waiting
                if all(r in done or r not in names for r in e.spec.reads)
            ]
            timed = [e for e in ready if e.spec.timed]
            alone = any(e.spec.timed for e in running.values())
            if timed and not running:
                start = timed[:1]
            elif timed or alone:
                start = []  # a timed one runs, or waits for the machine to be quiet
            else:
                start = ready[: jobs - len(running)]
            for entry in start:
                waiting.remove(entry)
                show(entry.name if entry.spec.timed else f"{jobs} at a time")
                running[pool.submit(one, entry)] = entry
            if not running:  # producers_first refused circles, so this cannot be
                raise RuntimeError(f"nothing can start: {[e.name for e in waiting]}")
            finished, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in finished:
                done.add(running.pop(future).name)
                future.result()  # a crash in the runner itself is not swallowed


def run_all(opts: argparse.Namespace) -> int:
    """Snippets that report times (``SPEC.timed``) run one at a time, with nothing
    beside them; the rest run ``--jobs`` at a time, since what they print does not
    depend on the machine being quiet. A snippet that reads another's results
    (``SPEC.reads``) starts after it has finished, and reruns when it reruns.
    Reported in name order."""
    from tqdm import tqdm

    results_dir = Path(opts.results).resolve()
    check_writable(results_dir)
    choose_backend(opts.backend, 1)
    entries = registry.snippets_by_name()
    order = producers_first(entries)  # unknown names, circles: one line
    for name in opts.only or []:
        registry.snippet(name)  # an unknown name is a one-line error
    chosen = [e for n, e in entries.items() if not opts.only or n in opts.only]
    report: dict[str, str] = {}
    failed: dict[str, str] = {}
    rerun: set[str] = set()
    for entry in sorted(chosen, key=lambda e: order.index(e.name)):
        if entry.spec.needs == "gpu" and gpu_count() == 0:
            report[entry.name] = f"skipped {entry.name}: needs GPUs"
            continue
        if not opts.force and not rerun.intersection(entry.spec.reads):
            previous = results.read(results_dir, entry.name) or {}
            key = results.cache_key(
                entry.path, opts.backend, results_dir, entry.spec.reads
            )
            if previous.get("hash") == key:
                report[entry.name] = f"cached  {entry.name}"
                continue
        rerun.add(entry.name)  # and so every snippet that reads its results
    to_run = [e for e in chosen if e.name in rerun]
    bar = tqdm(
        total=len(to_run), desc="run-all", unit="snippet", file=sys.stderr, disable=None
    )

    def one(entry: registry.Entry) -> None:
        timeout_s = opts.per_snippet_timeout
        ok, message = run_one(entry, results_dir, opts.backend, timeout_s)
        report[entry.name] = f"{'ran    ' if ok else 'FAILED '} {entry.name}: {message}"
        if not ok:
            notes = registry.notes_embedding(entry.name)
            where = ", ".join(str(p) for p in notes) or "no note"
            failed[entry.name] = f"{entry.name} ({where}): {message}"
        bar.update(1)

    run_in_order(to_run, opts.jobs, one, bar.set_postfix_str)
    bar.close()
    print("\n".join(report[e.name] for e in chosen))
    if failed:
        print(
            f"error: {len(failed)} snippet(s) failed: "
            + "; ".join(failed[e.name] for e in chosen if e.name in failed),
            file=sys.stderr,
        )
        return 1
    return 0
