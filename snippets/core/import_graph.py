"""The import graph of ``snippets/``, read from the code's syntax trees, never by
importing it: which files a module runs when it is imported.

``import_closure(path)`` is every file whose change can change what a module does: the
results cache hashes it (:func:`snippets.core.results.code_hash`), and the runtime reads
it to decide what the fork server preloads (:func:`steps_optimizer`).
:func:`import_cycles` finds the cycles of a graph of files or of folders (the tests
keep files, and the floors of ``snippets/``, free of them).
"""

from __future__ import annotations

import ast
import hashlib
import re
from pathlib import Path
from typing import TypeVar

REPO_DIR = Path(__file__).resolve().parents[2]
Node = TypeVar("Node")  # a file or a folder: anything sortable


def module_path(dotted: str) -> Path:
    """``snippets.comm.ring_allreduce`` → its file (a package → its ``__init__.py``)."""
    base = REPO_DIR.joinpath(*dotted.split("."))
    return base / "__init__.py" if base.is_dir() else base.with_suffix(".py")


def _type_checking(test: ast.expr) -> bool:
    """``if TYPE_CHECKING:`` or ``if typing.TYPE_CHECKING:``."""
    name = test.attr if isinstance(test, ast.Attribute) else getattr(test, "id", None)
    return name == "TYPE_CHECKING"


def local_imports(path: Path) -> set[Path]:
    """Files of the ``snippets`` modules this file imports, read from its syntax tree.

    Absolute (``from snippets.comm import plumbing``) and relative imports both count,
    at any depth (imports inside functions too); so does each package's ``__init__``.
    Imports under ``if TYPE_CHECKING:`` do not: Python never runs them.
    """
    source = path.read_bytes()
    key = (path.resolve(), hashlib.sha1(source).digest())  # an edited file is read anew
    if key not in _PARSED:
        _PARSED[key] = frozenset(_imports_in(key[0], source))
    return set(_PARSED[key])


_PARSED: dict[tuple[Path, bytes], frozenset[Path]] = {}  # parsing is the cost


def _imports_in(path: Path, source: bytes) -> set[Path]:
    dotted = ".".join(path.relative_to(REPO_DIR).with_suffix("").parts)
    package = dotted.rsplit(".", 1)[0]
    targets: set[str] = set()
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and _type_checking(node.test):
            node.body = []  # walked after this node: its imports are never run
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            targets.add(base)
            targets |= {f"{base}.{alias.name}" for alias in node.names}
    found = set()
    for name in targets:
        if name != "snippets" and not name.startswith("snippets."):
            continue
        parts = name.split(".")
        for i in range(1, len(parts) + 1):  # importing a.b.c runs a, a.b and a.b.c
            p = module_path(".".join(parts[:i]))
            if p.exists():
                found.add(p.resolve())
    return found


def _enclosing_packages(path: Path) -> list[Path]:
    """The ``__init__.py`` files Python runs before this file: ``snippets``, its
    subpackage, ... (importing ``snippets.comm.plumbing`` runs ``snippets/__init__``
    and ``snippets/comm/__init__`` first)."""
    parts = path.resolve().relative_to(REPO_DIR).with_suffix("").parts
    inits = [module_path(".".join(parts[:i])) for i in range(1, len(parts))]
    return [p.resolve() for p in inits if p.exists()]


def import_closure(path: Path) -> set[Path]:
    """This file, its packages' ``__init__`` files and every ``snippets`` file it
    imports, transitively: every file whose change can change what it does."""
    seen: set[Path] = set()
    todo = [path.resolve(), *_enclosing_packages(path)]
    while todo:
        p = todo.pop()
        if p not in seen:
            seen.add(p)
            todo += local_imports(p)
    return seen


_OPTIMIZER = re.compile(r"\boptim\b|Optimizer")


def steps_optimizer(path: Path) -> bool:
    """Whether a file this one runs names an optimizer: only then does the fork server
    preload what an optimizer's first step imports (a wrong guess costs time only)."""
    closure = import_closure(path) - {Path(__file__).resolve()}  # names the pattern
    return any(_OPTIMIZER.search(p.read_text(encoding="utf-8")) for p in closure)


def import_cycles(graph: dict[Node, set[Node]]) -> list[list[Node]]:
    """Every cycle found by a depth-first walk (each reported once, from where the walk
    closed it), as the nodes along it, the first repeated at the end."""
    cycles: list[list[Node]] = []
    state: dict[Node, int] = {}  # 1 on the current path, 2 done

    def visit(node: Node, path: list[Node]) -> None:
        state[node] = 1
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                cycles.append(path[path.index(nxt) :] + [nxt])
            elif nxt not in state:
                visit(nxt, path + [nxt])
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
    return cycles
