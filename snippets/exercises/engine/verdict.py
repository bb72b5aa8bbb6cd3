"""What the reader reads from the grader: the file they start from, and the verdict.

:func:`stub` writes the starting file (the contract as a docstring, the hints as
comments, no answer); :func:`report` turns an :class:`Outcome` into the lines
``exercise check`` prints: a line a case, the first failure's detail, and why the
ranks stopped (a timeout lists where each rank waited).
"""

from __future__ import annotations

import ast
import inspect
from typing import Callable

from snippets.exercises.engine.exercise import Exercise
from snippets.exercises.engine.on_ranks import Outcome


def _signature_text(fn: Callable) -> str:
    """The ``def`` line(s) of ``fn`` as written in its file, without the body."""
    source = inspect.getsource(fn)
    node = ast.parse(source).body[0]
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        raise TypeError(f"{fn!r} is not a function defined with def")
    first_body = node.body[0]
    lines = source.splitlines()[: first_body.lineno - 1]
    return "\n".join(lines).rstrip()


def stub(exercise: Exercise, command: str) -> str:
    """The file a reader starts from: the contract, the hints, no answer."""
    fn = exercise.function
    hints = "".join(f"    # hint: {h}\n" for h in exercise.hints)
    doc = exercise.contract.replace('"""', "'''")
    body = textwrap_indent(f'"""{doc}\n"""', "    ")
    graded = (
        f"on {' and '.join(map(str, exercise.world_sizes))} ranks over gloo"
        if exercise.distributed
        else "in one process"
    )
    built = (
        "\nBuild it from send and recv: the built-in collective is refused."
        if exercise.point_to_point
        else ""
    )
    return (
        f'"""Exercise: {exercise.title}.\n\n'
        f"Write {fn.__name__} so that it does what its docstring says, then:\n\n"
        f"    {command}\n\n"
        f"The grader runs it {graded}, with the checks the project's own\n"
        f"{fn.__name__} passes.{built}\n"
        f'"""\n\n'
        f"from __future__ import annotations\n\n"
        + (f"{exercise.imports.rstrip()}\n\n" if exercise.imports.strip() else "")
        + "\n"
        f"{exercise.signature.strip() or _signature_text(fn)}\n{body}\n{hints}"
        f'    raise NotImplementedError("{fn.__name__}: your code goes here")\n'
    )


def textwrap_indent(text: str, prefix: str) -> str:
    return "\n".join(
        prefix + line if line.strip() else line for line in text.split("\n")
    )


def report(ex: Exercise, outcome: Outcome) -> list[str]:
    where = (
        f"on {outcome.world_size} ranks (gloo)" if ex.distributed else "in one process"
    )
    lines = [f"{ex.name} {where}"]
    shown = False
    for case in outcome.cases:
        if case["failure"] is None:
            lines.append(f"  pass  {case['title']}")
            continue
        rank = f"rank {case['rank']}: " if ex.distributed else ""
        lines.append(f"  FAIL  {case['title']}: {rank}{case['failure']}")
        if not shown:
            lines += [f"        {d}" for d in case["detail"]]
            shown = True
    if outcome.died is not None:
        lines.append(f"  {outcome.died}")
        lines.append(
            "        (gloo prints its own message; it aborts a rank whose receive "
            "gets a message of another size)"
        )
    elif outcome.stopped is not None and "past the" in outcome.stopped:
        if not outcome.waits:  # one process, stopped by the alarm: its line is above
            return lines
        lines.append("  the ranks stopped; where each one waited:")
        for r, wait in sorted(outcome.waits.items()):
            lines.append(f"        rank {r} waited on {wait}")
    elif outcome.stopped is not None and ex.distributed:
        lines.append("  the check stopped there: every rank was stopped")
    elif outcome.stopped is not None:
        lines.append("  the check stopped there")
    return lines
