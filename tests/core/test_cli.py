"""`python -m snippets`: what a learner types, and what bad input gets back."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import REPO

from snippets.core import registry


def cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "snippets", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_list_shows_every_snippet_with_its_note() -> None:
    out = cli("list").stdout
    for name, entry in registry.snippets_by_name().items():
        line = next(line for line in out.splitlines() if line.split()[0] == name)
        assert str(entry.spec.world_size) in line.split()
        for note in registry.notes_embedding(name):
            assert str(note) in line


def test_run_prints_the_self_check() -> None:
    proc = cli("run", "process_groups", "-n", "2")
    assert proc.returncode == 0, proc.stderr
    assert "world: 2 ranks" in proc.stdout


@pytest.mark.parametrize(
    "args, says",
    [
        (["run", "no_such_snippet"], "unknown snippet 'no_such_snippet'"),
        (["run", "process_grups"], "did you mean 'process_groups'"),
        (["run", "process_groups", "-n", "0"], "-n must be at least 1"),
        (["run", "process_groups", "-n", "two"], "invalid int value"),
        (
            ["run", "process_groups", "--backend", "carrier-pigeon"],
            "unknown backend 'carrier-pigeon'",
        ),
        (["run", "process_groups", "--backend", "nccl", "-n", "64"], "nccl"),
        (["run", "process_groups", "--no-such-option"], "unrecognized arguments"),
        (["run-all", "--only", "nope"], "unknown snippet 'nope'"),
        (["bench", "nope"], "unknown benchmark 'nope'"),
        (["frobnicate"], "invalid choice"),
        (
            ["run", "parallelism", "-n", "3", "--micro-batches", "99"],
            "cannot split 10 samples",
        ),  # refused inside the ranks
    ],
)
def test_bad_input_is_one_line_and_exit_2(args: list[str], says: str) -> None:
    proc = cli(*args)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("error: "), (
        proc.stderr
    )
    assert says in proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout


def test_unwritable_results_folder_is_refused_before_running(tmp_path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    proc = cli("run-all", "--results", str(blocker / "results"))
    assert proc.returncode == 2
    assert (
        proc.stderr.startswith("error: cannot write results to")
        and proc.stderr.count("\n") == 1
    )
    assert blocker.read_text() == "not a folder"  # nothing lost


def test_run_all_names_the_failed_snippet_and_its_note(tmp_path) -> None:
    proc = cli(
        "run-all",
        "--only",
        "process_groups",
        "--results",
        str(tmp_path),
        "--per-snippet-timeout",
        "0.5",
    )
    assert proc.returncode == 1
    assert "process_groups" in proc.stderr and "timed out" in proc.stderr
    for note in registry.notes_embedding("process_groups"):
        assert str(note) in proc.stderr
    assert not (tmp_path / "process_groups.json").exists()


def test_run_all_writes_results_with_provenance_and_caches(tmp_path) -> None:
    first = cli("run-all", "--only", "process_groups", "--results", str(tmp_path))
    assert first.returncode == 0, first.stderr
    record = json.loads((tmp_path / "process_groups.json").read_text())
    assert set(record["provenance"]) >= {
        "device",
        "backend",
        "world_size",
        "torch",
        "commit",
        "utc",
    }
    assert record["provenance"]["world_size"] == 4 and record["provenance"][
        "backend"
    ] in {"gloo", "nccl"}
    assert record["output"] in (tmp_path / "process_groups.md").read_text()
    assert (tmp_path / "process_groups.ranks.md").read_text().startswith("| rank |")
    again = cli("run-all", "--only", "process_groups", "--results", str(tmp_path))
    assert (
        "cached" in again.stdout
        and json.loads((tmp_path / "process_groups.json").read_text()) == record
    )
    forced = cli(
        "run-all", "--only", "process_groups", "--results", str(tmp_path), "--force"
    )
    assert "ran" in forced.stdout
    assert (
        json.loads((tmp_path / "process_groups.json").read_text())["provenance"]["utc"]
        >= record["provenance"]["utc"]
    )
