"""The project's rule for bad input, one line naming the problem, exit status 2 and no
traceback, is checked in one place: tests/conftest.py's ``refused()`` (with
``exit_status()`` and ``refusal()`` under it). ``refused()`` fails what is no
refusal; and no other test file checks exit status 2 on its own, but for the few
below that need what only a real process shows."""

from __future__ import annotations

import ast
import os
import sys
from pathlib import Path

import pytest
from conftest import REPO, refused

from snippets.core.cli import OneLineParser, positive_int

TESTS = REPO / "tests"

# "file::function": why it checks exit status 2 itself, not through refused()
KEPT = {
    "tests/core/test_cli.py::test_the_real_process_refuses_in_one_line_and_exit_2": (
        "the one refusal run as a learner runs it: a fresh process, its exit status "
        "and its whole stderr"
    ),
    "tests/tools/test_gpu_check.py::test_without_a_gpu_it_refuses_in_one_line": (
        "CUDA_VISIBLE_DEVICES hides the GPU only from a process that has not yet "
        "started CUDA: on a GPU machine, only a fresh one shows the refusal"
    ),
    "tests/js/write_goldens.py::cli": (
        "no test: make runs it as a script, outside pytest, to record the size "
        "command's lines for the JavaScript port"
    ),
}

# A comparison with 2 of what holds an exit status: a return code, a caught exit's
# code, or what a command's entry point returned.
STATUS_NAMES = {"code", "status", "rc", "returncode", "exit_code", "exitcode"}
ENTRY_WORDS = ("main", "cli", "exit", "guarded")


def _holds_a_status(node: ast.expr) -> bool:
    if isinstance(node, ast.Name):
        return node.id in STATUS_NAMES
    if isinstance(node, ast.Attribute):
        return node.attr in STATUS_NAMES
    if isinstance(node, ast.Call):
        func = node.func
        name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
        return any(word in name for word in ENTRY_WORDS)
    return False


def _is_two(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and node.value == 2


def own_exit_checks(path: Path) -> list[tuple[int, str]]:
    """(line, enclosing function) of each place ``path`` checks exit status 2 by
    hand: a ``SystemExit`` caught or named, or a status compared with 2. Strings and
    comments are not code, so a docstring may name them."""
    found = []

    def visit(node: ast.AST, function: str) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            function = node.name
        named = getattr(node, "id", None) or getattr(node, "attr", None)
        if isinstance(node, (ast.Name, ast.Attribute)) and named == "SystemExit":
            found.append((node.lineno, function))
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            for op, a, b in zip(node.ops, sides, sides[1:]):
                if isinstance(op, ast.Eq) and (
                    (_is_two(b) and _holds_a_status(a))
                    or (_is_two(a) and _holds_a_status(b))
                ):
                    found.append((node.lineno, function))
        for child in ast.iter_child_nodes(node):
            visit(child, function)

    visit(ast.parse(path.read_text(encoding="utf-8")), "<module>")
    return found


def all_own_exit_checks() -> dict[str, list[int]]:
    """Each ``file::function`` that checks by hand → its lines (conftest aside)."""
    checks: dict[str, list[int]] = {}
    for path in sorted(TESTS.rglob("*.py")):
        if path.name == "conftest.py":
            continue
        for line, function in own_exit_checks(path):
            key = f"{path.relative_to(REPO)}::{function}"
            checks.setdefault(key, []).append(line)
    return checks


def test_no_test_checks_exit_status_2_on_its_own() -> None:
    found = {k: lines for k, lines in all_own_exit_checks().items() if k not in KEPT}
    assert not found, (
        "check a refusal with conftest's refused() (entry= for another entry point; "
        f"it returns the line), not by hand: {found}"
    )


def test_every_kept_case_is_still_there() -> None:
    """An entry the tests no longer need leaves the list, so that it stays short."""
    gone = set(KEPT) - set(all_own_exit_checks())
    assert not gone, f"no longer check exit status 2 themselves: {sorted(gone)}"


BY_HAND = [
    "with pytest.raises(SystemExit) as stop:\n    main(argv)\n",
    "try:\n    main(argv)\nexcept SystemExit as exc:\n    pass\n",
    "assert proc.returncode == 2\n",
    "assert stop.value.code == 2 and err\n",
    "assert 2 == status\n",
    "assert exercise_cli.main(argv) == 2\n",
    "assert cli(['run', 'x']) == 2\n",
    "assert exit_code(argv) == 2\n",
    "assert guarded(body) == 2\n",
]
OTHER = [
    '"""A refusal: SystemExit, code == 2."""\n',
    "assert len(rows) == 2 and store.run('a') == 2\n",
    "assert proc.returncode == 0 and late.status == 'not run'\n",
    "assert main(argv) == 0  # not SystemExit, nor code == 2\n",
    "assert words in refused(argv, capfd)\n",
]


@pytest.mark.parametrize(
    "code, by_hand", [(c, True) for c in BY_HAND] + [(c, False) for c in OTHER]
)
def test_the_scan_sees_each_way_of_checking_by_hand_and_nothing_else(
    code: str, by_hand: bool, tmp_path
) -> None:
    path = tmp_path / "test_x.py"
    path.write_text(f"def test_x():\n{_indent(code)}")
    assert [f for _, f in own_exit_checks(path)] == (["test_x"] if by_hand else [])


def _indent(code: str) -> str:
    return "".join(f"    {line}\n" for line in code.splitlines())


def says(out: str, err: str, status: int):
    """An entry point that prints ``out`` and ``err`` and returns ``status``."""

    def entry(argv: list[str]) -> int:
        print(out, end="")
        print(err, end="", file=sys.stderr)
        return status

    return entry


def test_refused_gives_back_the_line(capfd) -> None:
    assert refused(["x"], capfd, entry=says("", "error: no x\n", 2)) == "error: no x"


def test_a_parser_that_exits_2_is_a_refusal(capfd) -> None:
    parser = OneLineParser(prog="p")
    parser.add_argument("--n", type=positive_int)
    line = refused(["--n", "0"], capfd, entry=parser.parse_args)
    assert line == "error: argument --n: must be at least 1, got 0 (see --help)"


@pytest.mark.parametrize(
    "out, err, status",
    [
        ("", "error: no x\n", 1),  # another exit status
        ("", "error: no x\n", 0),
        ("", "error: no x\nand why\n", 2),  # two lines
        ("", "error: no x", 2),  # no end to the line
        ("", "", 2),  # nothing said
        ("Traceback (most recent call last):\n", "error: no x\n", 2),
    ],
)
def test_what_is_no_refusal_fails(out: str, err: str, status: int, capfd) -> None:
    with pytest.raises(AssertionError):
        refused([], capfd, entry=says(out, err, status))


def test_nothing_on_stdout_is_held_when_asked(capfd) -> None:
    entry = says("a table\n", "error: no x\n", 2)
    assert refused([], capfd, entry=entry) == "error: no x"
    with pytest.raises(AssertionError):
        refused([], capfd, entry=entry, nothing_on_stdout=True)


def test_env_is_set_for_the_call_alone(capfd, monkeypatch) -> None:
    monkeypatch.delenv("REFUSED_PROBE", raising=False)

    def entry(argv: list[str]) -> int:
        print(f"error: {os.environ['REFUSED_PROBE']}", file=sys.stderr)
        return 2

    assert refused([], capfd, {"REFUSED_PROBE": "set"}, entry=entry) == "error: set"
    assert "REFUSED_PROBE" not in os.environ
