"""The reader's file: loaded as a module of its own, its function held to the contract.

Bad input (no file, a syntax error, no such function, the wrong parameters) is a
:class:`~snippets.core.errors.UsageError` in one line; a file that raises while it is
imported is the reader's bug, graded as a failure (:class:`ImportFailed`).
:func:`reader_lines` picks the reader's own lines out of a traceback.
"""

from __future__ import annotations

import importlib.util
import inspect
import os
import sys
import traceback
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, Callable

from snippets.core.errors import UsageError

if TYPE_CHECKING:
    from snippets.exercises.engine.exercise import Exercise


def reader_lines(tb: Any, path: str) -> list[str]:
    """The frames of a traceback (or stack) that are in the reader's file, as
    ``line N, in f: code``: what the reader wrote, not the grader's internals."""
    frames = traceback.extract_tb(tb) if tb is not None else traceback.extract_stack()
    here = os.path.realpath(path)
    return [
        f"line {f.lineno}, in {f.name}: {(f.line or '').strip()}"
        for f in frames
        if os.path.realpath(f.filename) == here
    ]


def load(exercise: Exercise, path: str) -> Callable:
    """The reader's function from ``path``; bad input is a UsageError naming it."""
    file = Path(path)
    if not file.is_file():
        raise UsageError(f"{path}: no such file")
    source = file.read_text(encoding="utf-8")
    try:
        compile(source, str(file), "exec")
    except SyntaxError as exc:
        raise UsageError(
            f"{path}, line {exc.lineno}, column {exc.offset}: {exc.msg}"
        ) from None
    module = _import(file, exercise.name)
    name = exercise.function.__name__
    fn = getattr(module, name, None)
    if not callable(fn):
        raise UsageError(f"{path} has no function {name}: the exercise grades that one")
    want = exercise.parameters
    have = list(inspect.signature(fn).parameters.values())
    loose = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
    extra = [
        p
        for p in have[len(want) :]
        if p.default is inspect.Parameter.empty and p.kind not in loose
    ]
    if [p.name for p in have[: len(want)]] != want or extra:
        have = [p.name for p in have]
        raise UsageError(
            f"{path}: {name}({', '.join(have)}) should take ({', '.join(want)}), "
            "as the exercise's contract says"
        )
    return fn


def _import(file: Path, name: str) -> ModuleType:
    """Import the reader's file as a module of its own name (never a project name)."""
    module_name = f"_exercise_{name}"
    spec = importlib.util.spec_from_file_location(module_name, file)
    if spec is None or spec.loader is None:
        raise ImportFailed(f"{file} cannot be imported as a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        lines = reader_lines(exc.__traceback__, str(file))
        where = f" ({lines[-1]})" if lines else ""
        raise ImportFailed(f"importing it raised {type(exc).__name__}: {exc}{where}")
    return module


class ImportFailed(Exception):
    """The reader's file raised while it was imported: their bug, graded as a fail."""
