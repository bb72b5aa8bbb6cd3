"""Every exercise, found in this package's ``*_exercises`` modules, in reading order.

Each module lists its series' exercises in ``EXERCISES``. The order a reader meets
them is the order of their notes: the series (as the site lists them) and the note's
``part:``, read from the note's front matter; within a note, the module's order.
"""

from __future__ import annotations

import difflib
import importlib
import re
from functools import cache
from pathlib import Path

from snippets.core.errors import UsageError
from snippets.core.import_graph import REPO_DIR
from snippets.exercises.grader import Exercise

POSTS = REPO_DIR / "docs" / "blog" / "posts"
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


@cache
def exercises() -> tuple[Exercise, ...]:
    """Every exercise, in reading order."""
    here = Path(__file__).parent
    found: list[Exercise] = []
    for path in sorted(here.glob("*_exercises.py")):
        module = importlib.import_module(f"snippets.exercises.{path.stem}")
        found.extend(module.EXERCISES)

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
