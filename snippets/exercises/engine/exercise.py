"""What an exercise is: the code that grades it, and the words a reader reads.

A check file (``snippets/exercises/checks/``) declares the code half: the project's own
function, the check, the world sizes. The words (title, note, contract, hints, the
stub's imports and signature) come from the catalogue, ``snippets/exercises/
exercises.md``; :func:`snippets.exercises.catalog.exercises` joins the two.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:
    from snippets.exercises.engine.cases import Grade


@dataclass(frozen=True)
class Exercise:
    """One exercise: what the reader writes, and how it is graded.

    ``function`` is the project's own implementation: the reader's stub copies its
    signature and docstring, and it must pass ``check`` (a test makes sure).
    ``check(fn, grade)`` runs on every rank (once, in-process, where ``world_sizes``
    is ``(1,)``) and grades ``fn`` through ``grade.case``. The fields after
    ``point_to_point`` are the catalogue's; ``solution`` is the ``file:section`` the
    note shows, printed by ``exercise solution``.
    """

    name: str
    function: Callable
    check: Callable[[Callable, Grade], None]
    world_sizes: tuple[int, ...] = (1,)  # graded at each; -n N picks one
    point_to_point: bool = False  # built-in collectives refused
    # the words, from the catalogue
    title: str = ""
    note: str = ""  # the note's file stem: docs/blog/posts/<note>.md
    solution: str = ""  # "snippets/…/module.py:section"
    imports: str = ""  # what the stub needs for its signature
    doc: str = ""  # the contract, where the function's own docstring is not it
    hints: tuple[str, ...] = ()
    signature: str = ""  # the stub's def line, where the function's has more options

    def with_words(self, **words: object) -> Exercise:
        """This exercise with its words (the catalogue's fields) filled in."""
        return dataclasses.replace(self, **words)  # type: ignore[arg-type]

    @property
    def distributed(self) -> bool:
        return self.world_sizes != (1,)

    @property
    def parameters(self) -> list[str]:
        """The names the reader's function must take, in order (more are allowed
        only with defaults)."""
        if not self.signature:
            return list(inspect.signature(self.function).parameters)
        tree = ast.parse(self.signature.strip() + "\n    pass\n").body[0]
        if not isinstance(tree, ast.FunctionDef):
            raise TypeError(f"{self.name}: its signature is not one def line")
        a = tree.args
        return [x.arg for x in a.posonlyargs + a.args + a.kwonlyargs]

    @property
    def contract(self) -> str:
        return self.doc or inspect.getdoc(self.function) or ""
