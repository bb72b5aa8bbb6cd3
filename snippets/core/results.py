"""Results as data first (JSON), rendered second (Markdown, charts), with provenance.

What a snippet's ``main()`` may return (rank 0's value is the one kept)::

    {"tables": {TABLE: [{"column": value, ...}, ...]},  # results/<name>.TABLE.md
     "figures": {FIGURE: vega_lite_spec},  # <name>.FIGURE.vl.json and .md
     "markdown": {"<part>": "any Markdown, e.g. a mermaid fence"},  # <name>.<part>.md
     "parts": {"<part>": snippets.core.parts.player(trace)},  # <name>.<part>.md
     "excerpts": {"<part>": ["printed lines a note shows"]},  # <name>.<part>.md
     "provenance": {"backend": "gloo", "world_size": 2},  # if main() starts ranks
     ...anything else JSON can hold...}

``run-all`` adds what it saw: the command, its printed output, the provenance (device,
backend, world size, torch, commit, UTC time) and a hash of the code it ran, and writes
``results/<name>.json`` plus its renderings for the notes to include:
``snippets.render`` writes them (tables, charts, parts, each with a provenance line);
nothing here writes HTML. A snippet that reads another's results declares it
(``SPEC.reads``), finds that file in :func:`results_folder` (run-all's ``--results``),
and that file's bytes are part of its :func:`cache_key`. A figure's spec comes from
``snippets.core.charts``.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import platform
import subprocess
import textwrap
from pathlib import Path
from typing import Any

import torch

from snippets.core.errors import UsageError
from snippets.core.import_graph import REPO_DIR, import_closure
from snippets.core.runtime import describe_device

RESULTS_ENV = "COMMONPLACE_RESULTS"  # run-all sets it for each snippet it runs


def results_folder() -> Path:
    """Where the results of other snippets are: the folder run-all writes to (it
    names it in ``COMMONPLACE_RESULTS`` for each snippet it runs), else the repo's
    ``results/``."""
    return Path(os.environ.get(RESULTS_ENV) or REPO_DIR / "results")


def commit() -> str:
    try:
        sha = subprocess.run(
            ["git", "rev-parse", "--short=12", "HEAD"],
            cwd=REPO_DIR,
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=REPO_DIR,
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return sha + ("+changes" if dirty else "")


def provenance(
    backend: str, world_size: int, *, device: str | None = None
) -> dict[str, Any]:
    """Where and when a run happened, the one record every result, the notebook and
    the GPU check carry: the hardware (``describe_device(backend)`` unless given),
    backend (``"none"``: no process group), ranks, torch, Python, commit, UTC time."""
    return {
        "device": describe_device(backend) if device is None else device,
        "backend": backend,
        "world_size": world_size,
        "torch": torch.__version__,
        "python": platform.python_version(),
        "commit": commit(),
        "utc": datetime.datetime.now(datetime.timezone.utc).strftime(
            "%Y-%m-%dT%H:%M:%SZ"
        ),
    }


def code_hash(path: Path, extra: str) -> str:
    """Hash of the module, every snippets file it imports (transitively), and ``extra``.

    The import graph is read from the code itself, so a change to a building block
    (the point-to-point plumbing, the runtime) reruns every snippet built on it, and
    a change to the renderer rewrites every result.
    """
    render = Path(__file__).resolve().parents[1] / "render"
    files = import_closure(path) | {Path(__file__).resolve(), *render.glob("*.py")}
    h = hashlib.sha256(extra.encode())
    for p in sorted(files):
        h.update(str(p.relative_to(REPO_DIR)).encode() + b"\0" + p.read_bytes())
    return h.hexdigest()


def cache_key(path: Path, backend: str, results_dir: Path, reads=()) -> str:
    """What run-all keeps in ``hash``: the code hash on ``backend`` and, for each
    snippet named in ``reads``, the bytes of its ``results_dir/<name>.json`` as they
    are now (a missing file counts too), so a rerun of that snippet reruns this one.
    With nothing read it is ``code_hash(path, backend)``."""
    extra = backend
    for name in reads:
        try:
            seen = hashlib.sha256((results_dir / f"{name}.json").read_bytes())
        except OSError:
            seen = None
        extra += f"\0{name}={seen.hexdigest() if seen else 'missing'}"
    return code_hash(path, extra)


def markdown_table(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return "_(no rows)_\n"
    cols = list(dict.fromkeys(k for row in rows for k in row))

    def cell(v: Any) -> str:
        if isinstance(v, float):
            v = f"{v:.4g}"
        return str(v).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(cell(c) for c in cols) + " |", "|" + "---|" * len(cols)]
    lines += [
        "| " + " | ".join(cell(row.get(c, "")) for c in cols) + " |" for row in rows
    ]
    return "\n".join(lines) + "\n"


def admonition(kind: str, title: str, text: str) -> str:
    """A Markdown admonition box (``!!! kind "title"``) around ``text``, for a
    sentence a snippet renders from its own run, such as what ran and where."""
    body = textwrap.fill(" ".join(text.split()), 84, break_on_hyphens=False)
    return f'!!! {kind} "{title}"\n' + textwrap.indent(body, "    ") + "\n"


def read(results_dir: Path, name: str) -> dict[str, Any] | None:
    try:
        return json.loads((results_dir / f"{name}.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def needed(*names: str, by: str = "") -> dict[str, dict[str, Any]]:
    """{name: its run's result} for each snippet whose results another reads, from
    :func:`results_folder`; one missing or unreadable is a one-line
    :class:`UsageError` that names the file and the command to make it (``by``: who
    needs it, before "needs")."""
    folder, found = results_folder(), {}
    for name in names:
        record = read(folder, name) or {}
        if not isinstance(record.get("result"), dict):
            where = (
                f"{by} needs {folder / name}.json" if by else f"no {folder / name}.json"
            )
            raise UsageError(f"{where}: run 'python -m snippets run {name}' first")
        found[name] = record["result"]
    return found
