"""The deployment workflows: linted (actionlint), audited (zizmor), actions pinned to
commit SHAs."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO

WORKFLOWS = sorted((REPO / ".github" / "workflows").glob("*.yml"))
BIN = Path(sys.executable).parent


def tool(name: str) -> str:
    path = shutil.which(name, path=str(BIN)) or shutil.which(name)
    if path is None:
        pytest.fail(f"{name} is not installed: it is in the test extra (.[test])")
    return path


def run(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(argv, cwd=REPO, capture_output=True, text=True)


def test_actionlint_is_clean() -> None:
    proc = run(tool("actionlint"), "-no-color")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_zizmor_finds_nothing() -> None:
    proc = run(tool("zizmor"), "--offline", "--no-progress", ".github/workflows")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_every_action_is_pinned_to_a_commit() -> None:
    assert WORKFLOWS
    for wf in WORKFLOWS:
        for ref in re.findall(r"uses:\s*(\S+)", wf.read_text()):
            pinned = re.fullmatch(r"[\w.-]+/[\w./-]+@[0-9a-f]{40}", ref)
            assert pinned, f"{wf.name}: {ref} is not pinned to a SHA"
