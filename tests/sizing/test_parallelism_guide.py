"""The decision guide's tables equal what ``python -m snippets size --json`` prints for
each row's own command, the table the page includes is that one, and the claims the
guide's prose makes fail on numbers that contradict them."""

from __future__ import annotations

import copy
import json
import shlex
import subprocess
import sys

import pytest
from conftest import REPO

from snippets.sizing import parallelism_guide as guide
from snippets.sizing import size_cli

TABLES, RUNS = guide.tables()


def cli(command: str, capsys) -> dict:
    """The calculator's JSON for a command line, through the command's own parser."""
    argv = shlex.split(command)
    assert argv[:4] == ["python", "-m", "snippets", "size"], command
    assert size_cli.size(argv[4:] + ["--json"]) == 0
    return json.loads(capsys.readouterr().out)


def cells_from(r: dict) -> dict:
    """A row as the page shows it, written from the CLI's JSON alone."""
    mem, sent = r["memory_bytes"], r["comm_bytes_per_step"]
    states = mem["weights"] + mem["gradients"] + mem["optimizer"]
    out = {
        "GPUs": r["inputs"]["gpus"],
        "states GB": round(states / 1e9, 1),
        "activations GB": round(mem["activations"] / 1e9, 1),
        "total GB": round(mem["total"] / 1e9, 1),
        "fits 80 GB": "yes" if mem["total"] <= 80e9 else "no",
        "step s": round(r["step_time_s"], 2),
        "MFU": f"{r['mfu']:.0%}",
    }
    return out | {f"{k.upper()} GB sent": round(sent[k] / 1e9, 1) for k in sent}


@pytest.mark.parametrize("name", list(TABLES))
def test_every_row_equals_the_command_it_names(name, capsys) -> None:
    assert len(TABLES[name]) == len(RUNS[name]) >= 3
    for row, run in zip(TABLES[name], RUNS[name]):
        assert row["setup"] == run["setup"]
        expected = cells_from(cli(run["command"], capsys))
        shown = {k: v for k, v in row.items() if k != "setup"}
        assert shown == {k: expected[k] for k in shown}, run["command"]
        dropped = {k for k in expected if k.endswith("sent")} - set(shown)
        assert all(expected[k] == 0 for k in dropped), (run["command"], dropped)


def test_a_command_runs_as_printed_in_a_shell() -> None:
    run = RUNS["70b"][-1]
    argv = shlex.split(run["command"])
    proc = subprocess.run(
        [sys.executable, *argv[1:], "--json"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    assert (
        cells_from(json.loads(proc.stdout))["total GB"]
        == (guide.by_setup(TABLES["70b"])[run["setup"]]["total GB"])
    )


def value(cell: object) -> object:
    """A cell as a number where it is one (the page writes 0.0 as 0)."""
    try:
        return float(cell)
    except ValueError:
        return cell


def markdown_rows(text: str) -> list[dict]:
    lines = [ln for ln in text.splitlines() if ln.startswith("|")]
    head = [c.strip() for c in lines[0].strip("|").split("|")]
    return [
        dict(zip(head, (value(c.strip()) for c in ln.strip("|").split("|"))))
        for ln in lines[2:]
    ]


def test_the_page_includes_these_tables(results_dir) -> None:
    page = (REPO / "docs" / "guide.md").read_text(encoding="utf-8")
    for name, rows in TABLES.items():
        assert f'--8<-- "results/parallelism_guide.{name}.md"' in page
        shown = markdown_rows(
            (results_dir / f"parallelism_guide.{name}.md").read_text("utf-8")
        )
        printed = [  # a results table prints a float to 4 significant digits
            {
                k: float(f"{v:.4g}") if isinstance(v, float) else value(v)
                for k, v in r.items()
            }
            for r in rows
        ]
        assert shown == printed, name


@pytest.mark.parametrize(
    "table, setup, column, value",
    [
        ("7b", "DP", "fits 80 GB", "yes"),
        ("7b", "ZeRO-1", "DP GB sent", 1e6),
        ("7b", "PP 8", "PP GB sent", 1e6),
        ("70b", "ZeRO-3 64", "activations GB", 40.0),
        ("70b", "TP 8 × PP 8", "step s", 1e6),
        ("long", "TP 8 × PP 2 × CP 4", "activations GB", 1e6),
    ],
)
def test_a_table_that_contradicts_the_prose_fails(table, setup, column, value) -> None:
    guide.check_claims(TABLES)
    wrong = copy.deepcopy(TABLES)
    guide.by_setup(wrong[table])[setup][column] = value
    with pytest.raises(AssertionError):
        guide.check_claims(wrong)
