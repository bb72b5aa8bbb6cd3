"""Shared machinery lives once: no six lines of code appear in two files.

Every Python file of the project (snippets, hooks, tests) is read as its lines of code:
stripped, with blank lines, comments, docstrings, imports, the argument lines of a
signature and lone closing brackets left out, since those repeat by nature (two
functions may well take the same five arguments). Six such lines in a row that appear,
in the same order, in two files are a copy: the second should call the first.

The learner's solutions the grader is tested with (tests/exercises/right and wrong)
are left out: each is a whole file as a learner would write it, and a wrong one is a
right one with one mistake, on purpose.
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict

from conftest import REPO

WINDOW = 6
FOLDERS = ("snippets", "hooks", "tests")
SOLUTIONS = ("tests/exercises/right/", "tests/exercises/wrong/")
CLOSING = re.compile(r"[)\]}]+,?:?")


def _left_out(tree: ast.Module) -> set[int]:
    """Line numbers of imports, docstrings and a signature's argument lines."""
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            lines.update(range(node.lineno, node.end_lineno + 1))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            lines.update(range(node.lineno + 1, node.body[0].lineno))
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
            first = body[0].value
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                lines.update(range(body[0].lineno, body[0].end_lineno + 1))
    return lines


def code_lines(text: str) -> list[tuple[int, str]]:
    """(line number, stripped line) for each line of code that counts."""
    skip = _left_out(ast.parse(text))
    return [
        (n, s)
        for n, line in enumerate(text.splitlines(), 1)
        if n not in skip
        and (s := line.strip())
        and not s.startswith("#")
        and not CLOSING.fullmatch(s)
    ]


def copies(files: dict[str, str], window: int = WINDOW) -> list[str]:
    """Each run of ``window`` lines of code found in more than one file, once, as
    "a.py:12 = b.py:40" with the run's first line."""
    seen: dict[str, list[tuple[str, int]]] = defaultdict(list)
    for name, text in files.items():
        lines = code_lines(text)
        for k in range(len(lines) - window + 1):
            run = "\n".join(s for _, s in lines[k : k + window])
            seen[run].append((name, lines[k][0]))
    found, pairs = [], set()
    for run, where in seen.items():
        names = sorted({name for name, _ in where})
        if len(names) > 1 and tuple(names) not in pairs:
            pairs.add(tuple(names))
            at = " = ".join(f"{n}:{line}" for n, line in where)
            found.append(f"{at}\n    {run.splitlines()[0]}")
    return found


def project_files() -> dict[str, str]:
    files = {}
    for folder in FOLDERS:
        for path in sorted((REPO / folder).rglob("*.py")):
            name = path.relative_to(REPO).as_posix()
            if not name.startswith(SOLUTIONS):
                files[name] = path.read_text()
    return files


def test_no_six_lines_of_code_in_two_files() -> None:
    files = project_files()
    assert len(files) > 300, len(files)
    found = copies(files)
    assert not found, f"{len(found)} copies:\n" + "\n".join(found)


# The reader itself, on code made to be copied, and on code that only looks alike.

TIMER = '''
def timed(fn):
    """Seconds of one call."""
    start = time.perf_counter()
    fn()
    elapsed = time.perf_counter() - start
    if elapsed < 0:
        raise ValueError(elapsed)
    samples.append(elapsed)
    return elapsed
'''


def test_a_copied_function_is_found_wherever_it_sits() -> None:
    other = "import time\n\nx = 1\n" + TIMER.replace("timed", "clocked")
    found = copies({"a.py": TIMER, "b.py": other})
    assert len(found) == 1 and found[0].startswith("a.py:4 = b.py:7"), found


def test_five_lines_in_common_are_not_a_copy() -> None:
    other = TIMER.replace("timed", "clocked").replace("samples.append", "log")
    assert not copies({"a.py": TIMER, "b.py": other})


def test_imports_signatures_docstrings_and_brackets_do_not_count() -> None:
    alike = '''
"""A docstring
of
six
lines
alike
in both."""
from x import (
    a,
    b,
    c,
    d,
    e,
    f,
)


def g(
    a: int,
    b: int,
    c: int,
    d: int,
    e: int,
    f: int,
):
    """Same words."""
    return [
        (
            {
                a
            }
        )
    ]
'''
    assert not copies({"a.py": alike, "b.py": alike.replace("return", "yield")})
