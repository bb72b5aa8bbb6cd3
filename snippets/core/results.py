"""Results as data first (JSON), rendered second (Markdown, charts), with provenance.

What a snippet's ``main()`` may return (rank 0's value is the one kept)::

    {"tables": {"<table>": [{"column": value, ...}, ...]},  # results/<name>.<table>.md
     "figures": {"<figure>": vega_lite_spec},  # <name>.<figure>.vl.json and .md
     "markdown": {"<part>": "any Markdown, e.g. a mermaid fence"},  # <name>.<part>.md
     "provenance": {"backend": "gloo", "world_size": 2},  # if main() starts ranks
     ...anything else JSON can hold...}

``run-all`` adds what it saw: the command, its printed output, the provenance (device,
backend, world size, torch, commit, UTC time) and a hash of the code it ran, and writes
``results/<name>.json`` plus ``results/<name>.md`` (the output and a provenance line)
for the notes to include. A snippet that reads another's results declares it
(``SPEC.reads``), finds that file in :func:`results_folder` (run-all's ``--results``),
and that file's bytes are part of its :func:`cache_key`. A figure's spec comes from
``snippets.core.charts``.
"""

from __future__ import annotations

import csv
import datetime
import hashlib
import html
import io
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
    (the point-to-point plumbing, the runtime) reruns every snippet built on it.
    """
    files = import_closure(path) | {Path(__file__).resolve()}
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


def _cell_html(v: Any) -> str:
    return html.escape(f"{v:.4g}" if isinstance(v, float) else str(v))


def _csv_type(values: list[Any]) -> str | None:
    """The Vega parse type a column's values all share (None: no CSV can carry them).
    Empty strings are left out: CSV reads an empty field back as null."""
    kinds = {type(v) for v in values if v is not None}
    if kinds <= {bool}:
        return "boolean"
    if kinds <= {int, float}:
        return "number"
    if kinds <= {str} and "" not in values:
        return "string"
    return None


def as_csv(data: dict[str, Any]) -> dict[str, Any]:
    """Inline data of flat rows as Vega's CSV with a type per column: the same values
    in a third of the bytes (no key repeated on every row). Data it cannot carry as it
    is (nested values, dotted names, mixed types, a format already given) is
    returned as it came."""
    rows = data.get("values")
    if not isinstance(rows, list) or not rows or "format" in data:
        return data
    if not all(isinstance(r, dict) for r in rows):
        return data
    names = list(dict.fromkeys(k for r in rows for k in r))
    if any(set(k) & set('.[]\\"') for k in names):
        return data
    parse = {k: _csv_type([r.get(k) for r in rows]) for k in names}
    if None in parse.values():
        return data
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(names)
    for r in rows:
        writer.writerow(
            "" if r.get(k) is None else str(r[k]).lower() if isinstance(r[k], bool)
            else r[k] for k in names
        )  # fmt: skip
    return {**data, "values": out.getvalue(), "format": {"type": "csv", "parse": parse}}


def chart_html(spec: dict[str, Any]) -> str:
    """A chart for the page: the Vega-Lite spec inline (the page's script draws it), a
    caption, and the data as a table for readers who cannot see the chart.

    The table is ``usermeta.rows`` where the spec gives them (a chart of many spans
    tabled by what they sum to), else the chart's rows; ``usermeta.columns`` names
    its columns. The inline spec carries its rows as CSV (:func:`as_csv`).
    It has no blank line, since a blank line would end the HTML block in Markdown."""
    if not isinstance(spec, dict):
        raise TypeError(f"a figure is a Vega-Lite spec (dict), not {type(spec)}")
    title = spec.get("title", "")
    title = " ".join(title) if isinstance(title, list) else str(title)
    caption = html.escape(spec.get("description") or title)
    meta = spec.get("usermeta", {})
    columns = meta.get("columns", {})
    rows = meta.get("rows") or spec.get("data", {}).get("values", [])
    columns = columns or dict.fromkeys(k for row in rows for k in row)
    head = "".join(f"<th>{html.escape(t or k)}</th>" for k, t in columns.items())
    body = "".join(
        "<tr>"
        + "".join(f"<td>{_cell_html(row.get(k, ''))}</td>" for k in columns)
        + "</tr>"
        for row in rows
    )
    page = dict(spec)
    if "rows" in meta:  # the table has them; the script does not need them
        page["usermeta"] = {k: v for k, v in meta.items() if k != "rows"}
    if isinstance(spec.get("data"), dict):
        page["data"] = as_csv(spec["data"])
    # "</" would end the script element early; JSON allows the escaped "<\/".
    inline = json.dumps(page, ensure_ascii=False).replace("</", "<\\/")
    return (
        '<figure class="cp-chart">\n'
        '<div class="cp-chart__view"></div>\n'
        f'<script type="application/json" class="cp-chart__spec">{inline}</script>\n'
        f"<figcaption>{caption}</figcaption>\n"
        '<details class="cp-chart__data" data-search-exclude="chart data">'
        "<summary>The numbers</summary>\n"
        f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>\n"
        "</details>\n"
        "</figure>\n"
    )


def admonition(kind: str, title: str, text: str) -> str:
    """A Markdown admonition box (``!!! kind "title"``) around ``text``, for a
    sentence a snippet renders from its own run, such as what ran and where."""
    body = textwrap.fill(" ".join(text.split()), 84, break_on_hyphens=False)
    return f'!!! {kind} "{title}"\n' + textwrap.indent(body, "    ") + "\n"


def provenance_line(p: dict[str, Any]) -> str:
    ranks = f"{p['world_size']} rank{'s' if p['world_size'] != 1 else ''}"
    text = (
        f"Last run: {p['device']} · {p['backend']} · {ranks} · torch {p['torch']} · "
        f"commit {p['commit']} · {p['utc'].replace('T', ' ').replace('Z', ' UTC')}"
    )
    return f'<p class="cp-provenance">{html.escape(text)}</p>\n'


def write(results_dir: Path, name: str, record: dict[str, Any]) -> list[Path]:
    """Write one snippet's record and its renderings; return the files written."""
    results_dir.mkdir(parents=True, exist_ok=True)
    value = record.get("result") if isinstance(record.get("result"), dict) else {}
    prov = provenance_line(record["provenance"])
    files: dict[str, str] = {}
    command, output = record["command"], record["output"].rstrip()
    files[f"{name}.md"] = f'```text title="$ {command}"\n{output}\n```\n\n{prov}'
    for table, rows in value.get("tables", {}).items():
        files[f"{name}.{table}.md"] = markdown_table(rows) + "\n" + prov
    for figure, spec in value.get("figures", {}).items():
        files[f"{name}.{figure}.vl.json"] = json.dumps(spec, indent=2) + "\n"
        files[f"{name}.{figure}.md"] = chart_html(spec) + "\n" + prov
    for part, text in value.get("markdown", {}).items():
        files[f"{name}.{part}.md"] = f"{text.rstrip()}\n\n{prov}"
    files[f"{name}.json"] = json.dumps(record, indent=2, default=str) + "\n"
    written = []
    for filename, text in files.items():
        path = results_dir / filename
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written


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
