"""The house's triad: every concept is a module, a note and a test. Every registered
snippet has a note that embeds it and a test file that mirrors it (so does every
runtime module in core; a building block is tested through a concept that uses it);
every section a module marks for a note is embedded by one, and every section a note
embeds exists.
Plus the two size rules a reader's eye relies on: a section a note shows is about 120
lines at most, and every line fits 88 columns. A module is as long as its one concept
needs; what is capped is what a reader sees."""

from __future__ import annotations

import re
from pathlib import Path

from conftest import REPO

from snippets.core import import_graph
from snippets.tools import registry

SNIPPETS = REPO / "snippets"
DOCS = REPO / "docs"
MARKER = re.compile(r"^\s*# --8<-- \[(start|end):(\w+)\]\s*$", re.M)
EMBED = re.compile(r"""--8<--\s+["'](snippets/[\w/]+\.py):(\w+)["']""")
MAX_SECTION_LINES = 120  # what a note shows at once
MAX_COLUMNS = 88


def python_files(*folders: str) -> list[Path]:
    return sorted(p for f in folders for p in (REPO / f).rglob("*.py"))


def embedded_sections() -> set[tuple[str, str]]:
    """(file, section) for every include of a module's section in any note."""
    return {
        (file, section)
        for note in DOCS.rglob("*.md")
        for file, section in EMBED.findall(note.read_text(encoding="utf-8"))
    }


def marked_sections() -> dict[tuple[str, str], set[str]]:
    """(file, section) → the marker kinds ({"start", "end"}) found for it."""
    found: dict[tuple[str, str], set[str]] = {}
    for path in python_files("snippets"):
        relative = str(path.relative_to(REPO))
        for kind, section in MARKER.findall(path.read_text(encoding="utf-8")):
            found.setdefault((relative, section), set()).add(kind)
    return found


def test_every_snippet_has_a_note_that_embeds_it() -> None:
    entries = registry.snippets_by_name()
    assert entries
    orphans = [name for name in entries if not registry.notes_embedding(name)]
    assert not orphans, f"snippets no note embeds: {orphans}"


def mirrored_test_file(dotted: str) -> Path:
    *package, name = dotted.split(".")[1:]  # snippets.comm.cost.x → comm, cost, x
    return REPO.joinpath("tests", *package, f"test_{name}.py")


def test_every_snippet_and_core_module_has_its_mirrored_test_file() -> None:
    core = [n for n in registry.module_names() if n.startswith("snippets.core.")]
    concepts = [e.module.__name__ for e in registry.snippets_by_name().values()]
    missing = [
        str(mirrored_test_file(dotted).relative_to(REPO))
        for dotted in concepts + core
        if not mirrored_test_file(dotted).is_file()
    ]
    assert not missing, f"missing test files: {missing}"


def test_every_helper_is_tested_through_a_concept() -> None:
    """A module without SPEC is a building block: a tested snippet must import it (or
    it has a test file of its own)."""
    snippets = [e.module.__name__ for e in registry.snippets_by_name().values()]
    reached = set()
    for dotted in snippets:
        if mirrored_test_file(dotted).is_file():
            reached |= import_graph.import_closure(import_graph.module_path(dotted))
    untested = [
        dotted
        for dotted in registry.module_names()
        if dotted not in snippets
        and not dotted.startswith("snippets.core.")  # held to a test file above
        and import_graph.module_path(dotted).resolve() not in reached
        and not mirrored_test_file(dotted).is_file()
    ]
    assert not untested, f"helpers no tested snippet uses: {untested}"


def test_every_marked_section_is_embedded_by_a_note() -> None:
    marked = marked_sections()
    assert marked
    dead = sorted(f"{f}:{s}" for f, s in set(marked) - embedded_sections())
    assert not dead, f"sections no note embeds (embed or remove them): {dead}"


def test_every_marked_section_has_a_start_and_an_end() -> None:
    half = sorted(
        f"{f}:{s}" for (f, s), kinds in marked_sections().items() if len(kinds) < 2
    )
    assert not half, f"sections with a start and no end, or the reverse: {half}"


def test_every_embedded_section_exists() -> None:
    missing = sorted(
        f"{f}:{s}" for f, s in embedded_sections() - set(marked_sections())
    )
    assert not missing, f"notes embed sections that no module marks: {missing}"


def section_lengths() -> dict[str, int]:
    """``file:section`` → the lines between its start and end markers."""
    found: dict[str, int] = {}
    for path in python_files("snippets"):
        start: dict[str, int] = {}
        lines = path.read_text(encoding="utf-8").splitlines()
        for i, line in enumerate(lines):
            if m := MARKER.match(line):
                kind, section = m.groups()
                if kind == "start":
                    start[section] = i
                elif section in start:
                    key = f"{path.relative_to(REPO)}:{section}"
                    found[key] = i - start.pop(section) - 1
    return found


def test_sections_a_note_shows_are_about_120_lines_at_most() -> None:
    lengths = section_lengths()
    assert lengths
    long = {k: n for k, n in lengths.items() if n > MAX_SECTION_LINES}
    assert not long, f"sections too long to read at once (lines): {long}"


def test_code_lines_fit_88_columns() -> None:
    wide = [
        f"{p.relative_to(REPO)}:{i}"
        for p in python_files("snippets", "tests")
        for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
        if len(line) > MAX_COLUMNS
    ]
    assert not wide, f"lines over {MAX_COLUMNS} columns: {wide[:20]}"


def test_test_file_names_are_unique() -> None:
    # tests/ has no __init__.py: pytest imports each test file by its bare name
    names = [p.name for p in python_files("tests") if p.name.startswith("test_")]
    twice = sorted({n for n in names if names.count(n) > 1})
    assert not twice, f"test files that share a name: {twice}"
