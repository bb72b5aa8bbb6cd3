"""The floors of ``snippets/``: its folders form no import cycle, and no folder
imports a folder above it. ``core`` is the ground floor; the pure formulas of
``sizing`` and the renderer sit on it; ``models`` above those; then the building
blocks, the strategies, what runs on them, the exercises, and over everything the
machinery that runs them all. Folders that share a floor import none of each other.
The command line (``snippets/__main__.py``) stands apart: it may import any folder,
and none imports it."""

from __future__ import annotations

from pathlib import Path

from conftest import REPO

from snippets.core import import_graph
from snippets.tools import registry

SNIPPETS = REPO / "snippets"
FLOORS: list[tuple[str, ...]] = [  # lowest first
    ("core",),  # runtime, results, charts: what every snippet imports
    ("sizing", "render"),  # the calculator's pure formulas; parts and results drawn
    ("models",),  # the tiny GPT and its layers (MoE included)
    ("comm", "attention"),  # collectives by hand; attention kernels
    ("parallel",),  # the strategies, built on models, comm and attention
    ("hardware", "faults", "viewer"),  # what runs on the strategies, and shows them
    ("exercises",),  # the reader's versions, graded against every floor below
    ("tools",),  # the registry, run-all, the GPU check: they run every floor
]
FLOOR = {folder: level for level, floors in enumerate(FLOORS) for folder in floors}

Import = tuple[Path, Path]  # (importing file, imported file)


def folder(path: Path) -> str:
    """The folder of ``snippets/`` a file lies in (``comm`` for comm/cost/x.py)."""
    return path.resolve().relative_to(SNIPPETS).parts[0]


def folder_imports() -> dict[tuple[str, str], list[Import]]:
    """(folder, folder it imports) → every import that makes the edge, by file: the
    modules it names (a package's ``__init__`` only where the file names no module)."""
    edges: dict[tuple[str, str], list[Import]] = {}
    for dotted in registry.module_names():  # never the CLI
        source = import_graph.module_path(dotted).resolve()
        targets = [
            t
            for t in import_graph.local_imports(source)
            if t.parent != SNIPPETS and folder(t) != folder(source)
        ]  # snippets/__init__.py is no folder's
        for target in sorted(targets):
            named = any(folder(t) == folder(target) for t in targets if t != target)
            if target.name != "__init__.py" or not named:
                edge = (folder(source), folder(target))
                edges.setdefault(edge, []).append((source, target))
    return edges


def shown(imports: list[Import]) -> str:
    return "; ".join(
        f"{s.relative_to(REPO)} imports {t.relative_to(REPO)}" for s, t in imports
    )


def test_every_folder_of_snippets_has_a_floor() -> None:
    folders = {p.name for p in SNIPPETS.iterdir() if (p / "__init__.py").is_file()}
    assert folders == set(FLOOR), (
        f"place on a floor: {sorted(folders - set(FLOOR))}; "
        f"gone: {sorted(set(FLOOR) - folders)}"
    )


def test_no_folder_imports_itself_through_others() -> None:
    edges = folder_imports()
    assert edges  # the walk sees imports between folders
    graph: dict[str, set[str]] = {}
    for a, b in edges:
        graph.setdefault(a, set()).add(b)
    cycles = import_graph.import_cycles(graph)
    why = [
        " → ".join(c) + ": " + shown([edges[e][0] for e in zip(c, c[1:])])
        for c in cycles
    ]
    assert not cycles, f"folder cycles: {why}"


def test_no_folder_imports_a_folder_above_it_or_beside_it() -> None:
    wrong = [
        f"{a} (floor {FLOOR[a]}) → {b} (floor {FLOOR[b]}): {shown(imports)}"
        for (a, b), imports in sorted(folder_imports().items())
        if FLOOR[b] >= FLOOR[a]
    ]
    assert not wrong, "imports against the floors: " + " | ".join(wrong)
