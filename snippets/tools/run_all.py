"""``python -m snippets run-all``: run every snippet once, in its own process, and
write ``results/`` for the notes.

Each snippet runs as ``python -m snippets run NAME --out FILE`` in a fresh process
session, so one that hangs is killed with all its ranks after ``--per-snippet-timeout``.
A snippet is not rerun while its code (its whole import closure, see
:func:`snippets.core.results.code_hash`) and the results of other snippets it reads
(``SPEC.reads``, see :func:`snippets.core.results.cache_key`) are what they were at
its last good run on the same backend. The snippets it reads run before it (see
:mod:`snippets.tools.run_order`), and it is not run at all if one of them fails;
snippets that report times run alone; the others run ``--jobs`` at a time. A child
finds the results folder through :func:`snippets.core.results.results_folder`. The
run exits 1 naming every snippet that failed or was not run, and the note that
embeds it.

With ``--keep-going`` (``make serve``: a reader's machine, where one snippet failing
must not take the site down) it names them the same way and exits 0, and each
results file a note includes of a snippet that failed or was not run, where there is
none, gets a placeholder: an admonition saying what failed and the command that shows
it whole (:func:`write_placeholders`). A placeholder is never a good run: no
``NAME.json`` is written, a snippet that has one among its files is rerun however its
code stands, and a good run removes those it no longer covers.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from snippets import render
from snippets.core import import_graph, ranks, results
from snippets.core.errors import UsageError
from snippets.core.runtime import choose_backend, gpu_count
from snippets.tools import registry
from snippets.tools.run_order import not_run_because, producers_first, run_in_order

DEFAULT_RESULTS = registry.REPO_DIR / "results"
# The last line of every placeholder: how run-all tells one from a good run's file.
PLACEHOLDER = "<!-- run-all --keep-going: a placeholder, not a result -->"


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


# The snippets running now, each the leader of its own process session.
RUNNING: set[subprocess.Popen] = set()


def _stop_running(signum: int, _frame: object) -> None:
    """Interrupted or terminated (Ctrl-C, make's kill): stop every snippet running
    and its ranks (their sessions do not hear this run-all's signals), then leave."""
    for proc in list(RUNNING):
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    print(f"run-all stopped by signal {signum}", file=sys.stderr, flush=True)
    os._exit(128 + signum)  # the worker threads wait on children that are gone


def _last_line(output: str, returncode: int) -> str:
    lines = output.strip().splitlines()
    return lines[-1] if lines else f"exit status {returncode}"


def run_child(
    name: str, backend: str, timeout_s: float, results_dir: Path, together: int = 1
) -> tuple[dict | None, str]:
    """``python -m snippets run NAME`` in a fresh process session, told that the
    results it reads are in ``results_dir`` and that ``together`` snippets share the
    cores (so it takes its share of them, see :func:`ranks.thread_share`): what it
    wrote to ``--out`` and its output, or None and why it failed."""
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
            env={
                **os.environ,
                "PYTHONUNBUFFERED": "1",
                results.RESULTS_ENV: str(results_dir),
                "OMP_NUM_THREADS": str(ranks.thread_share(together)),
            },
        )
        RUNNING.add(proc)
        try:
            output, _ = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)  # the runner and every rank it spawned
            proc.communicate()
            return None, f"timed out after {timeout_s:.0f} s"
        finally:
            RUNNING.discard(proc)
        if proc.returncode != 0:
            return None, _last_line(output, proc.returncode)
        return json.loads(out.read_text(encoding="utf-8")), output


def observing(entries: dict[str, registry.Entry]) -> set[str]:
    """The snippets that check an observation: the file that builds one
    (``Observation(...)``) is the snippet's own, or a file it imports itself."""
    builds = set()
    for path in registry.PACKAGE_DIR.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            func = node.func if isinstance(node, ast.Call) else None
            if getattr(func, "id", getattr(func, "attr", None)) == "Observation":
                builds.add(path.resolve())
                break
    return {
        name
        for name, e in entries.items()
        if ({e.path.resolve()} | import_graph.local_imports(e.path)) & builds
    }


def command_for(entry: registry.Entry) -> str:
    """The command that runs one snippet as run-all does, for a reader to type."""
    n = entry.spec.world_size
    return f"python -m snippets run {entry.name}" + (f" -n {n}" if n > 1 else "")


def included_parts(name: str) -> list[str]:
    """The files of ``results/`` named for this snippet that the notes include
    (``--8<-- "results/NAME.part.md"``), by file name, each once."""
    pattern = re.compile(rf"""--8<--\s+["']results/({re.escape(name)}\.[^"':]+)""")
    docs = registry.DOCS_DIR
    notes = sorted(docs.rglob("*.md")) if docs.is_dir() else []
    found = (m for p in notes for m in pattern.findall(p.read_text(encoding="utf-8")))
    return sorted(set(found))


def is_placeholder(path: Path) -> bool:
    try:
        return path.read_text(encoding="utf-8").rstrip().endswith(PLACEHOLDER)
    except (OSError, UnicodeDecodeError):
        return False


def placeholders(results_dir: Path, name: str) -> list[Path]:
    """This snippet's files in ``results_dir`` that are placeholders."""
    return [p for p in results_dir.glob(f"{name}.*") if is_placeholder(p)]


def placeholder_text(entry: registry.Entry, why: str) -> str:
    """What a note shows where a snippet's result would be: a box whose title alone
    says what happened, then the marker that tells it from a good run's file."""
    tick = "`" * (max(map(len, re.findall("`+", why)), default=0) + 1)
    box = results.admonition(
        "failure",
        f"{entry.name} did not run on this machine",
        f"Run `{command_for(entry)}` to see why. run-all reported: {tick} {why} {tick}",
    )
    return f"{box}\n{PLACEHOLDER}\n"


def write_placeholders(
    results_dir: Path, entry: registry.Entry, why: str
) -> list[Path]:
    """A placeholder for each results file of ``entry`` that a note includes and that
    is missing or a placeholder itself; a good run's file is never touched. ``why``:
    the last line of its error, or why it was not run."""
    text, written = placeholder_text(entry, why), []
    for part in included_parts(entry.name):
        path = results_dir / part
        if path.exists() and not is_placeholder(path):
            continue
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written


def run_one(
    entry: registry.Entry,
    results_dir: Path,
    backend: str,
    timeout_s: float,
    together: int = 1,
) -> tuple[bool, str]:
    """Run one snippet in a child process, one of ``together`` running at once; write
    its results if it passed, and remove the placeholders of an earlier failure that
    those did not replace. Returns (ok, message)."""
    command = command_for(entry)
    start = time.monotonic()
    ran, output = run_child(entry.name, backend, timeout_s, results_dir, together)
    if ran is None:
        return False, output
    # a snippet that starts its own ranks (SPEC world_size 1) says how they ran
    value = ran["result"]
    own = value.get("provenance", {}) if isinstance(value, dict) else {}
    seen = {k: ran[k] for k in ("backend", "world_size")}
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
    written = render.write(results_dir, entry.name, record)
    for stale in set(placeholders(results_dir, entry.name)) - set(written):
        stale.unlink()
    return True, f"{record['seconds']:.1f} s"


def run_all(opts: argparse.Namespace) -> int:
    """Run the chosen snippets into ``opts.results``, one run-all at a time per
    folder (see :func:`one_at_a_time`)."""
    results_dir = Path(opts.results).resolve()
    check_writable(results_dir)
    # bad input is refused at once, not after another run-all has finished
    choose_backend(opts.backend, 1)
    producers_first(registry.snippets_by_name())  # unknown names, circles: one line
    for name in opts.only or []:
        registry.snippet(name)  # an unknown name is a one-line error
    signals = (signal.SIGINT, signal.SIGTERM)
    main = threading.current_thread() is threading.main_thread()
    before = [signal.signal(s, _stop_running) for s in signals] if main else []
    try:
        with one_at_a_time(results_dir):
            return _run_all(opts, results_dir)
    finally:
        for signum, handler in zip(signals, before):
            signal.signal(signum, handler)


def lock_path(results_dir: Path) -> Path:
    """The lock a run-all holds while it writes ``results_dir``: in the temp folder,
    named for the folder's path, so that the results folder holds results alone."""
    digest = hashlib.sha256(str(results_dir.resolve()).encode()).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"commonplace-run-all-{digest}.lock"


@contextmanager
def one_at_a_time(results_dir: Path) -> Iterator[None]:
    """Two run-alls on one results folder (``make test``'s and the suite's, or a
    reader's ``make serve`` beside ``make test``) never write it at once: the second
    says it waits, waits, then finds cached what the first ran."""
    from filelock import FileLock, Timeout  # torch's own dependency

    lock = FileLock(str(lock_path(results_dir)))
    try:
        lock.acquire(timeout=0)
    except Timeout:
        print(f"waiting for the run-all writing {results_dir}", file=sys.stderr)
        lock.acquire()
    try:
        yield
    finally:
        lock.release()


def _run_all(opts: argparse.Namespace, results_dir: Path) -> int:
    """Snippets that report times (``SPEC.timed``) run one at a time, with nothing
    beside them; the rest run ``--jobs`` at a time, since what they print does not
    depend on the machine being quiet. A snippet that reads another's results
    (``SPEC.reads``) starts after it has finished, reruns when it reruns, and is not
    run when it fails (its previous results stay). Reported in name order.
    ``opts.keep_going``: placeholders for what failed, and exit 0."""
    from tqdm import tqdm

    entries = registry.snippets_by_name()
    order = producers_first(entries)
    chosen = [e for n, e in entries.items() if not opts.only or n in opts.only]
    if getattr(opts, "observing", False):
        chosen = [e for e in chosen if e.name in observing(entries)]
    report: dict[str, str] = {}
    failed: dict[str, str] = {}  # failed or not run: why, and the notes embedding it
    not_run: set[str] = set()
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
            if previous.get("hash") == key and not placeholders(
                results_dir, entry.name
            ):
                report[entry.name] = f"cached  {entry.name}"
                continue
        rerun.add(entry.name)  # and so every snippet that reads its results
    to_run = [e for e in chosen if e.name in rerun]
    bar = tqdm(
        total=len(to_run), desc="run-all", unit="snippet", file=sys.stderr, disable=None
    )

    def fail(entry: registry.Entry, message: str) -> None:
        notes = registry.notes_embedding(entry.name)
        where = ", ".join(str(p) for p in notes) or "no note"
        failed[entry.name] = f"{entry.name} ({where}): {message}"
        why[entry.name] = message

    def one(entry: registry.Entry) -> bool:
        timeout_s = opts.per_snippet_timeout
        together = 1 if entry.spec.timed else opts.jobs  # timed ones run alone
        ok, message = run_one(entry, results_dir, opts.backend, timeout_s, together)
        report[entry.name] = f"{'ran    ' if ok else 'FAILED '} {entry.name}: {message}"
        if not ok:
            fail(entry, message)
        bar.update(1)
        return ok

    def skip(entry: registry.Entry, chain: list[str]) -> None:
        report[entry.name] = f"SKIPPED {entry.name}: {not_run_because(chain)}"
        fail(entry, not_run_because(chain))
        not_run.add(entry.name)
        bar.update(1)

    why: dict[str, str] = {}  # failed or not run: the message alone
    run_in_order(to_run, opts.jobs, one, bar.set_postfix_str, skip)
    bar.close()
    print("\n".join(report[e.name] for e in chosen))
    if not failed:
        return 0
    count = f"{len(failed) - len(not_run)} snippet(s) failed"
    count += f", {len(not_run)} not run" if not_run else ""
    said = "; ".join(failed[e.name] for e in chosen if e.name in failed)
    if not getattr(opts, "keep_going", False):  # opts made by hand: strict
        print(f"error: {count}: {said}", file=sys.stderr)
        return 1
    shown = [
        path.name
        for e in chosen
        if e.name in failed
        for path in write_placeholders(results_dir, e, why[e.name])
    ]
    print(
        f"kept going: {count}: {said}; placeholders in {results_dir}: "
        + (", ".join(shown) or "none (every part a note includes is there)"),
        file=sys.stderr,
    )
    return 0
