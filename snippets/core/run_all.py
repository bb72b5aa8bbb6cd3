"""``python -m snippets run-all``: run every snippet once, in its own process, and
write ``results/`` for the notes.

Each snippet runs as ``python -m snippets run NAME --out FILE`` in a fresh process
session, so one that hangs is killed with all its ranks after ``--per-snippet-timeout``.
A snippet whose code (its whole import closure, see
:func:`snippets.core.results.code_hash`) is unchanged since its last good run on the
same backend is not rerun. Snippets that report times run alone; the others run
``--jobs`` at a time. The run exits 1 naming every snippet that failed and the
note that embeds it.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

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


def run_one(
    entry: registry.Entry, results_dir: Path, backend: str, timeout_s: float
) -> tuple[bool, str]:
    """Run one snippet in a child process; write its results if it passed.
    Returns (ok, message)."""
    n = entry.spec.world_size
    command = f"python -m snippets run {entry.name}" + (f" -n {n}" if n > 1 else "")
    with tempfile.TemporaryDirectory(prefix="commonplace-run-") as tmp:
        out = Path(tmp) / "result.json"
        argv = [sys.executable, "-m", "snippets", "run", entry.name]
        argv += ["--backend", backend, "--out", str(out)]
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
            return False, _last_line(output, proc.returncode)
        ran = json.loads(out.read_text(encoding="utf-8"))
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
        "hash": results.code_hash(entry.path, backend),
        "provenance": results.provenance(**{**seen, **own}),
    }
    results.write(results_dir, entry.name, record)
    return True, f"{record['seconds']:.1f} s"


def run_all(opts: argparse.Namespace) -> int:
    """Snippets that report times (``SPEC.timed``) run first, one at a time, with
    nothing beside them; the rest then run ``--jobs`` at a time, since what they print
    does not depend on the machine being quiet. Reported in name order."""
    from tqdm import tqdm

    results_dir = Path(opts.results).resolve()
    check_writable(results_dir)
    choose_backend(opts.backend, 1)
    entries = registry.snippets_by_name()
    for name in opts.only or []:
        registry.snippet(name)  # an unknown name is a one-line error
    chosen = [e for n, e in entries.items() if not opts.only or n in opts.only]
    report: dict[str, str] = {}
    failed: dict[str, str] = {}
    to_run = []
    for entry in chosen:
        previous = results.read(results_dir, entry.name)
        if entry.spec.needs == "gpu" and gpu_count() == 0:
            report[entry.name] = f"skipped {entry.name}: needs GPUs"
            continue
        unchanged = previous and previous.get("hash") == results.code_hash(
            entry.path, opts.backend
        )
        if unchanged and not opts.force:
            report[entry.name] = f"cached  {entry.name}"
            continue
        to_run.append(entry)
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

    for entry in [e for e in to_run if e.spec.timed]:
        bar.set_postfix_str(entry.name)
        one(entry)
    bar.set_postfix_str(f"the rest, {opts.jobs} at a time")
    with ThreadPoolExecutor(max_workers=opts.jobs) as pool:
        list(pool.map(one, [e for e in to_run if not e.spec.timed]))
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
