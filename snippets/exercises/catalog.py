"""Every exercise, in reading order: its code from ``checks/``, its words from the
catalogue, ``exercises.md``.

Each ``checks/*_checks`` module lists its exercises' code half in ``CHECKS``; the
catalogue (its format is written at its top) holds every exercise's words, joined here
by name. A field missing, empty or unknown, and an entry without a check or a check
without an entry, are a :class:`UsageError` of one line naming the exercise and the
field. The order a reader meets exercises is the order of their notes: the series (as
the site lists them) and the note's ``part:``, read from the note's front matter;
within a note, the check module's order.
"""

from __future__ import annotations

import difflib
import importlib
import re
from functools import cache
from pathlib import Path

from snippets.core.errors import UsageError
from snippets.core.import_graph import REPO_DIR
from snippets.exercises.engine import Exercise

POSTS = REPO_DIR / "docs" / "blog" / "posts"
CATALOGUE = Path(__file__).parent / "exercises.md"
REQUIRED = ("title", "note", "solution", "imports", "contract", "hints")
OPTIONAL = ("signature",)
SERIES = (  # as mkdocs.yml's categories_allowed lists them
    "Distributed training, by hand",
    "Attention, tiled",
    "Sizing",
    "Seeing models",
    "What each operation costs",
    "When it goes wrong",
)


def note_facts(note: str) -> dict:
    """title, series and part from a note's front matter."""
    text = (POSTS / f"{note}.md").read_text(encoding="utf-8")
    front = text.split("---", 2)[1]
    title = re.search(r'^title:\s*"?(.*?)"?\s*$', front, re.M)
    part = re.search(r"^part:\s*(\d+)", front, re.M)
    series = re.search(r"^categories:\s*\n\s*-\s*(.+?)\s*$", front, re.M)
    return {
        "title": title.group(1) if title else note,
        "part": int(part.group(1)) if part else 0,
        "series": series.group(1) if series else "",
        "slug": re.search(r"^slug:\s*(\S+)", front, re.M).group(1),  # type: ignore
    }


def read_catalogue(path: Path | None = None) -> dict[str, dict[str, str]]:
    """Each ``## name`` of the catalogue → its ``### field`` → the field's text, blank
    lines around it dropped. A line inside a ``` block is never a heading."""
    path = path or CATALOGUE
    entries: dict[str, dict[str, str]] = {}
    name = field = None
    fenced = False
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        fenced ^= line.startswith("```")
        heading = re.match(r"(#{2,3}) (\S+)\s*$", line) if not fenced else None
        if heading and heading.group(1) == "##":
            name, field = heading.group(2), None
            if name in entries:
                raise UsageError(f"{path.name}, line {number}: {name} comes twice")
            entries[name] = {}
        elif heading and name is not None:
            field = heading.group(2)
            if field not in REQUIRED + OPTIONAL or field in entries[name]:
                raise UsageError(
                    f"{path.name}, line {number}: {name}: field {field!r} is unknown "
                    f"or twice (the fields: {', '.join(REQUIRED + OPTIONAL)})"
                )
            entries[name][field] = ""
        elif field is not None:
            entries[name][field] += line + "\n"  # type: ignore[index]
    return {n: {f: t.strip("\n") for f, t in e.items()} for n, e in entries.items()}


def words(name: str, entry: dict[str, str]) -> dict:
    """The Exercise fields of one catalogue entry; a field missing or malformed is
    one line naming the exercise and the field."""

    def bad(field: str, why: str) -> UsageError:
        return UsageError(f"{CATALOGUE.name}: {name}: field {field!r} {why}")

    for field in REQUIRED:
        if field not in entry:
            raise bad(field, "is missing")
        if not entry[field].strip() and field != "imports":
            raise bad(field, "is empty")
    code = {}
    for field in ("imports", "signature"):
        if field not in entry:
            continue
        lines = entry[field].splitlines()
        if len(lines) < 2 or lines[0] != "```python" or lines[-1] != "```":
            raise bad(field, "should be one ```python block")
        code[field] = "".join(line + "\n" for line in lines[1:-1])
    hints = entry["hints"].splitlines()
    if not all(h.startswith("- ") for h in hints):
        raise bad("hints", "should be a list, one '- ' line a hint")
    for field in ("title", "note", "solution"):
        if "\n" in entry[field]:
            raise bad(field, "should be one line")
    return {
        "title": entry["title"],
        "note": entry["note"],
        "solution": entry["solution"],
        "imports": code["imports"],
        "signature": code.get("signature", "").rstrip("\n"),
        "doc": entry["contract"],
        "hints": tuple(h[2:] for h in hints),
    }


def checks() -> list[Exercise]:
    """The code half of every exercise, from ``checks/*_checks.py``, in file order."""
    here = Path(__file__).parent / "checks"
    found: list[Exercise] = []
    for path in sorted(here.glob("*_checks.py")):
        module = importlib.import_module(f"snippets.exercises.checks.{path.stem}")
        found.extend(module.CHECKS)
    return found


@cache
def exercises() -> tuple[Exercise, ...]:
    """Every exercise, its code joined to its words, in reading order."""
    entries = read_catalogue()
    found = checks()
    for name in set(entries) - {ex.name for ex in found}:
        raise UsageError(
            f"{CATALOGUE.name}: {name}: an entry with no check of its name"
        )
    for ex in found:
        if ex.name not in entries:
            raise UsageError(f"{CATALOGUE.name}: {ex.name}: no entry for this check")
    found = [ex.with_words(**words(ex.name, entries[ex.name])) for ex in found]

    def order(pair: tuple[int, Exercise]) -> tuple:
        facts = note_facts(pair[1].note)
        series = facts["series"]
        rank = SERIES.index(series) if series in SERIES else len(SERIES)
        return rank, facts["part"], pair[0]

    return tuple(ex for _, ex in sorted(enumerate(found), key=order))


def exercise(name: str) -> Exercise:
    """The exercise called ``name``; an unknown name is one line naming the nearest."""
    by_name = {ex.name: ex for ex in exercises()}
    if name in by_name:
        return by_name[name]
    near = difflib.get_close_matches(name, by_name, n=3)
    also = f"; did you mean {', '.join(near)}?" if near else ""
    raise UsageError(
        f"no exercise called {name!r}{also} ('python -m snippets exercise list' "
        "names them all)"
    )
