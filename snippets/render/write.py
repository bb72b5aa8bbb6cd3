"""One snippet's record into ``results/``: the JSON first, then its renderings.

What a result may hold (see ``snippets.core.results``)::

    results/<name>.json            the record: command, output, result, provenance
    results/<name>.md              the printed output, in a text block
    results/<name>.<table>.md      each of "tables", as a Markdown table
    results/<name>.<figure>.md     each of "figures" (and .vl.json, the spec)
    results/<name>.<part>.md       each of "markdown" (as it is) and "parts" (rendered)
    results/<name>.<excerpt>.md    each of "excerpts": printed lines a note shows

Each rendering ends with the run's provenance line.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from snippets.core.results import markdown_table
from snippets.render.fragments import chart, provenance, render


def output_block(command: str, lines: str) -> str:
    """Printed output as the page shows it: a text block titled by its command."""
    return f'```text title="$ {command}"\n{lines.rstrip()}\n```\n'


def renderings(name: str, record: dict[str, Any]) -> dict[str, str]:
    """{file name: text} of every rendering of ``record``."""
    value = record.get("result") if isinstance(record.get("result"), dict) else {}
    prov = provenance(record["provenance"])
    command = record["command"]
    files = {f"{name}.md": output_block(command, record["output"]) + "\n" + prov}
    for table, rows in value.get("tables", {}).items():
        files[f"{name}.{table}.md"] = markdown_table(rows) + "\n" + prov
    for figure, spec in value.get("figures", {}).items():
        files[f"{name}.{figure}.vl.json"] = json.dumps(spec, indent=2) + "\n"
        files[f"{name}.{figure}.md"] = chart(spec) + "\n" + prov
    for part, text in value.get("markdown", {}).items():
        files[f"{name}.{part}.md"] = f"{text.rstrip()}\n\n{prov}"
    for part, found in value.get("parts", {}).items():
        files[f"{name}.{part}.md"] = render(found) + "\n" + prov
    for part, lines in value.get("excerpts", {}).items():
        text = "\n".join(lines) if isinstance(lines, list) else str(lines)
        files[f"{name}.{part}.md"] = output_block(command, text) + "\n" + prov
    return files


def write(results_dir: Path, name: str, record: dict[str, Any]) -> list[Path]:
    """Write one snippet's record and its renderings; return the files written."""
    results_dir.mkdir(parents=True, exist_ok=True)
    files = renderings(name, record)
    files[f"{name}.json"] = json.dumps(record, indent=2, default=str) + "\n"
    written = []
    for filename, text in files.items():
        path = results_dir / filename
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written
