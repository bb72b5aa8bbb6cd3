"""A test that reads what run-all wrote asks for it: ``results_dir`` (or
``built_site``) waits for run-all, and sorts the test after those that need nothing.
One that opens ``results/`` by its path passes or fails by where the scheduler happened
to put it."""

from __future__ import annotations

import re

from conftest import REPO, SPREAD, WholeFiles

# A path into the results folder built from the repository's root (not one a test
# only compares with a default: "== REPO_DIR / 'results' / ...").
BY_PATH = re.compile(
    r"""(?<!== )(?<!== str\()REPO(?:_DIR)?\s*/\s*["']results["']\s*/"""
)


def test_no_test_opens_results_by_its_path() -> None:
    found = [
        f"{path.relative_to(REPO)}:{n}"
        for path in sorted((REPO / "tests").rglob("*.py"))
        if path.name != "test_waits.py"
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if BY_PATH.search(line)
    ]
    assert not found, f"ask for the results_dir fixture instead: {found}"


def test_the_pattern_finds_what_it_is_for() -> None:
    assert BY_PATH.search('json.loads((REPO / "results" / "x.json").read_text())')
    assert BY_PATH.search("REPO_DIR / 'results' / name")
    assert not BY_PATH.search('results_dir / "x.json"')
    assert not BY_PATH.search('REPO_DIR / "results"')  # the folder itself, a default
    assert not BY_PATH.search('assert p == str(REPO_DIR / "results" / "x.json")')


def test_a_file_goes_whole_to_one_process_unless_it_is_spread() -> None:
    """A file's tests share its fixtures in one process; a SPREAD file's tests (minutes
    each) are handed out one at a time, so no process is left alone with them all."""
    (spread,) = SPREAD
    whole = "tests/core/test_ranks.py"
    scope = WholeFiles._split_scope
    assert {scope(None, f"{whole}::test_{k}") for k in "ab"} == {whole}
    ids = {f"{spread}::test_x[pages {k} mod 4]" for k in range(4)}
    assert {scope(None, nodeid) for nodeid in ids} == ids
