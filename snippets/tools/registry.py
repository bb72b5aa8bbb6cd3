"""Which snippets and benchmarks exist, found by walking the package, never by a list.

A concept module is any module under ``snippets/`` that defines ``SPEC`` (a
:class:`~snippets.core.runtime.Spec`) and ``main()``; its leaf name (``ring_allreduce``)
is its key, so leaf names are unique across the packages. A benchmark is any module
that defines ``BENCH = "<name>"`` and ``main(**options)``, its options declared in
``add_arguments(parser)``: ``bench NAME`` runs it as ``run`` runs its snippet (one,
attention, keeps a ``bench(argv)`` of its own: its sweep is not the note's run).
Every other module is a building block; ``run`` on one names the snippets nearest to
it in the import graph (:func:`building_blocks`), the ones to run to see it work. The
note that embeds a snippet is found by reading ``docs/`` for its include lines.
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
from snippets.core.import_graph import REPO_DIR, local_imports, module_path
from snippets.core.runtime import Spec

PACKAGE_DIR = Path(snippets.__file__).resolve().parent
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
    if dotted:  # a module, but one that other modules build on
        raise UsageError(not_a_snippet(dotted[0]))
    found = snippets_by_name()
    if name not in found:
        close = difflib.get_close_matches(name, found, n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise UsageError(
            f"unknown snippet {name!r}: {hint}"
            f"'python -m snippets list' shows all {len(found)}"
        )
    return found[name]


def nearest_snippets(
    target: Path, importers: dict[Path, set[Path]], snippet_files: dict[Path, str]
) -> list[str]:
    """The snippets closest to ``target`` in the import graph: those importing it
    directly, else those with the fewest modules between (``importers``: file → the
    files that import it; ``snippet_files``: a snippet's file → its name)."""
    seen, frontier = {target}, {target}
    while frontier:
        frontier = {i for f in frontier for i in importers.get(f, ())} - seen
        hits = sorted(snippet_files[f] for f in frontier if f in snippet_files)
        if hits:
            return hits
        seen |= frontier
    return []


def building_blocks() -> dict[str, list[str]]:
    """Every module outside ``snippets.core`` that is neither a snippet nor a
    benchmark → the nearest snippets built on it (what to run to see it work): first
    those a note showing the module also runs, then those that time nothing."""
    benches = set(bench_modules().values())
    files = {m: module_path(m).resolve() for m in module_names()}
    importers: dict[Path, set[Path]] = {}
    for f in files.values():
        for imported in local_imports(f) - {f}:
            importers.setdefault(imported, set()).add(f)
    entries = snippets_by_name()
    runnable = {e.path.resolve(): n for n, e in entries.items()}
    timed = {bench.rsplit(".", 1)[1] for bench in benches}
    found = {}
    for m, f in files.items():
        if m.startswith("snippets.core.") or f in runnable or m in benches:
            continue
        name, notes = m.rsplit(".", 1)[1], set(notes_embedding(m.rsplit(".", 1)[1]))
        found[name] = sorted(
            nearest_snippets(f, importers, runnable),
            key=lambda r: (not notes & set(notes_embedding(r)), r in timed, r),
        )
    return found


def not_a_snippet(dotted: str) -> str:
    """One line for ``run`` on a module without SPEC: what to run instead."""
    name = dotted.rsplit(".", 1)[1]
    if dotted.startswith("snippets.core."):
        return (
            f"{name} is shared machinery in snippets.core, not a snippet: "
            "'python -m snippets list' shows the snippets"
        )
    bench = {d: b for b, d in bench_modules().items()}.get(dotted)
    if bench:
        return (
            f"{name} is a benchmark, not a snippet: python -m snippets bench {bench} "
            "--help"
        )
    runners = building_blocks().get(name, [])
    if not runners:
        return f"{name} is a building block, not a snippet, and no snippet imports it"
    also = f" (also {', '.join(runners[1:4])})" if len(runners) > 1 else ""
    return (
        f"{name} is a building block, not a snippet; it runs in {runners[0]}{also}: "
        f"python -m snippets run {runners[0]}"
    )


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
    if not callable(getattr(module, "main", None)):
        raise RuntimeError(f"{benches[name]} sets BENCH but has no main()")
    return module


def benches_by_name() -> dict[str, ModuleType]:
    """Every benchmark, imported (for checks over all of them)."""
    return {name: bench(name) for name in bench_modules()}


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
