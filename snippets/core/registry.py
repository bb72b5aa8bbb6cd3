"""Which snippets and benchmarks exist, found by walking the package, never by a list.

A concept module is any module under ``snippets/`` that defines ``SPEC`` (a
:class:`~snippets.core.runtime.Spec`) and ``main()``; its leaf name (``ring_allreduce``)
is its key, so leaf names are unique across the packages. A benchmark is any module
that defines ``BENCH = "<name>"`` and ``bench(argv) -> int``. The note that embeds a
snippet is found by reading ``docs/`` for its include lines.
"""

from __future__ import annotations

import ast
import difflib
import importlib
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from types import ModuleType

import snippets
from snippets.core.errors import UsageError
from snippets.core.runtime import Spec

PACKAGE_DIR = Path(snippets.__file__).resolve().parent
REPO_DIR = PACKAGE_DIR.parent
DOCS_DIR = REPO_DIR / "docs"


@dataclass(frozen=True)
class Entry:
    name: str
    module: ModuleType

    @property
    def spec(self) -> Spec:
        return self.module.SPEC

    @property
    def path(self) -> Path:
        return Path(self.module.__file__)


def walk(package_dir: Path, package: str = "snippets") -> tuple[str, ...]:
    """Every public module (dotted) in the packages under ``package_dir``, read from the
    file tree: a folder is a package if it has an ``__init__.py``; ``_private`` files
    and ``__main__`` (the CLI) are not modules here. Sorted by leaf name.

    Two modules with the same leaf name are refused: the leaf is the registry key and
    the name of its results files.
    """
    found: dict[str, str] = {}
    for path in sorted(package_dir.rglob("*.py")):
        parts = path.relative_to(package_dir).with_suffix("").parts
        folders = [package_dir.joinpath(*parts[:i]) for i in range(len(parts))]
        if path.stem.startswith("_") or not all(
            (f / "__init__.py").is_file() for f in folders
        ):
            continue
        dotted = ".".join((package, *parts))
        if path.stem in found:
            raise RuntimeError(
                f"{found[path.stem]} and {dotted} share the leaf name {path.stem!r}: "
                "leaf names are the registry key, so rename one"
            )
        found[path.stem] = dotted
    return tuple(found[leaf] for leaf in sorted(found))


@cache
def module_names() -> tuple[str, ...]:
    """Every public module under ``snippets`` (dotted); never the CLI."""
    return walk(PACKAGE_DIR)


def _modules() -> list[ModuleType]:
    return [importlib.import_module(name) for name in module_names()]


def snippets_by_name() -> dict[str, Entry]:
    return {
        m.__name__.rsplit(".", 1)[1]: Entry(m.__name__.rsplit(".", 1)[1], m)
        for m in _modules()
        if _is_snippet(m)
    }


def _is_snippet(module: ModuleType) -> bool:
    return isinstance(getattr(module, "SPEC", None), Spec) and callable(
        getattr(module, "main", None)
    )


def snippet(name: str) -> Entry:
    """The snippet called ``name``, or a one-line error that suggests the nearest.

    Only that module is imported (the leaf names it); the others are imported only to
    say what was meant when the name is wrong."""
    dotted = [m for m in module_names() if m.rsplit(".", 1)[1] == name]
    if dotted and _is_snippet(module := importlib.import_module(dotted[0])):
        return Entry(name, module)
    found = snippets_by_name()
    if name not in found:
        close = difflib.get_close_matches(name, found, n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise UsageError(
            f"unknown snippet {name!r}: {hint}"
            f"'python -m snippets list' shows all {len(found)}"
        )
    return found[name]


def _bench_name(path: Path) -> str | None:
    """The module's ``BENCH = "<name>"``, read from its syntax tree (not imported)."""
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if (
            isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == "BENCH" for t in node.targets)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            return node.value.value
    return None


@cache
def bench_modules() -> dict[str, str]:
    """Benchmark name → dotted module, found without importing any of them."""
    found = {}
    for dotted in module_names():
        name = _bench_name(module_path(dotted))
        if name is not None:
            found[name] = dotted
    return found


def bench(name: str) -> ModuleType:
    """The benchmark called ``name`` (only its module is imported), or one line."""
    benches = bench_modules()
    if name not in benches:
        names = ", ".join(sorted(benches)) or "none"
        raise UsageError(f"unknown benchmark {name!r}: choose one of {names}")
    module = importlib.import_module(benches[name])
    if not callable(getattr(module, "bench", None)):
        raise RuntimeError(f"{benches[name]} sets BENCH but has no bench(argv)")
    return module


def benches_by_name() -> dict[str, ModuleType]:
    """Every benchmark, imported (for checks over all of them)."""
    return {name: bench(name) for name in bench_modules()}


def module_path(dotted: str) -> Path:
    """``snippets.comm.ring_allreduce`` → its file (a package → its ``__init__.py``)."""
    base = REPO_DIR.joinpath(*dotted.split("."))
    return base / "__init__.py" if base.is_dir() else base.with_suffix(".py")


def notes_embedding(name: str) -> list[Path]:
    """Notes (relative to docs/) that include this snippet's code or results."""
    pattern = re.compile(
        rf"""--8<--\s+["'](?:snippets/(?:\w+/)*{name}\.py|results/{name}\.)"""
    )
    if not DOCS_DIR.is_dir():
        return []
    return sorted(
        p.relative_to(DOCS_DIR)
        for p in DOCS_DIR.rglob("*.md")
        if pattern.search(p.read_text(encoding="utf-8"))
    )


def local_imports(path: Path) -> set[Path]:
    """Files of the ``snippets`` modules this file imports, read from its syntax tree.

    Absolute (``from snippets.comm import plumbing``) and relative imports both count,
    at any depth (imports inside functions too); so does each package's ``__init__``.
    """
    dotted = ".".join(path.resolve().relative_to(REPO_DIR).with_suffix("").parts)
    package = dotted.rsplit(".", 1)[0]
    targets: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
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
    closure = import_closure(path)
    return any(_OPTIMIZER.search(p.read_text(encoding="utf-8")) for p in closure)
