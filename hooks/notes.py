"""Lists made from the notes themselves, never kept by hand.

* ``docs/sitemap.md``: ``<!-- notes:by-series -->`` and ``<!-- notes:by-date -->``
  become every note, grouped by series and by month.
* ``docs/index.md``: ``<!-- notes:latest -->`` (the newest notes) and
  ``<!-- notes:series -->``.
* every note gets "previous / next in this series" links at its end.

A note is ``docs/blog/posts/*.md``; its series is its first category, its date the
scalar ``date:`` of its front matter.
"""

from __future__ import annotations

import datetime
import posixpath
from dataclasses import dataclass
from itertools import groupby

from mkdocs.exceptions import PluginError
from mkdocs.utils.meta import get_data

POSTS_DIR = "blog/posts/"
LATEST = 5


@dataclass(frozen=True)
class Note:
    src_uri: str
    title: str
    date: datetime.date
    series: str
    description: str


_notes: list[Note] = []


def on_files(files, config):
    notes = []
    for f in files:
        if not (f.src_uri.startswith(POSTS_DIR) and f.src_uri.endswith(".md")):
            continue
        _, meta = get_data(f.content_string)
        date = meta.get("date")
        if not isinstance(date, datetime.date):
            raise PluginError(
                f"{f.src_uri}: front matter needs a scalar 'date: YYYY-MM-DD'"
                " (the feeds read it)"
            )
        if not meta.get("title") or not meta.get("categories"):
            raise PluginError(
                f"{f.src_uri}: front matter needs 'title' and 'categories'"
                " (the first is the series)"
            )
        notes.append(
            Note(
                f.src_uri,
                meta["title"],
                date,
                meta["categories"][0],
                meta.get("description", ""),
            )
        )
    _notes[:] = sorted(notes, key=lambda n: (n.date, n.src_uri))
    return files


def _link(note: Note, from_uri: str) -> str:
    rel = posixpath.relpath(note.src_uri, posixpath.dirname(from_uri) or ".")
    return f"[{note.title}]({rel})"


def _line(note: Note, from_uri: str) -> str:
    return f"- {note.date:%Y-%m-%d} · {_link(note, from_uri)}"


def _series_order() -> list[str]:
    return list(
        dict.fromkeys(n.series for n in _notes)
    )  # in order of each series' first note


def by_series(from_uri: str) -> str:
    parts = []
    for series in _series_order():
        parts.append(f"### {series}\n")
        parts += [_line(n, from_uri) for n in _notes if n.series == series]
        parts.append("")
    return "\n".join(parts) or "_No notes yet._"


def by_date(from_uri: str) -> str:
    parts = []
    for month, notes in groupby(reversed(_notes), key=lambda n: f"{n.date:%B %Y}"):
        parts.append(f"### {month}\n")
        parts += [f"{_line(n, from_uri)} ({n.series})" for n in notes]
        parts.append("")
    return "\n".join(parts) or "_No notes yet._"


def latest(from_uri: str) -> str:
    return "\n".join(
        f"{_line(n, from_uri)}: {n.description}"
        for n in list(reversed(_notes))[:LATEST]
    )


def series_list(from_uri: str) -> str:
    lines = []
    for series in _series_order():
        notes = [n for n in _notes if n.series == series]
        lines.append(
            f"- **{series}**: {len(notes)} note{'s' if len(notes) != 1 else ''}, "
            f"starting with {_link(notes[0], from_uri)}"
        )
    return "\n".join(lines)


def series_nav(note: Note) -> str:
    same = [n for n in _notes if n.series == note.series]
    i = same.index(note)
    prev = f"← Previous: {_link(same[i - 1], note.src_uri)}" if i > 0 else ""
    nxt = f"Next: {_link(same[i + 1], note.src_uri)} →" if i + 1 < len(same) else ""
    if not prev and not nxt:
        return ""
    return (
        f'\n\n<nav class="cp-series-nav" markdown="span" aria-label="{note.series}">'
        f'<span markdown="span">{prev}</span><span markdown="span">{nxt}</span></nav>\n'
    )


def on_page_markdown(markdown, page, config, files):
    uri = page.file.src_uri
    replacements = {
        "<!-- notes:by-series -->": by_series,
        "<!-- notes:by-date -->": by_date,
        "<!-- notes:latest -->": latest,
        "<!-- notes:series -->": series_list,
    }
    for marker, make in replacements.items():
        if marker in markdown:
            markdown = markdown.replace(marker, make(uri))
    note = next((n for n in _notes if n.src_uri == uri), None)
    if note is not None:
        markdown += series_nav(note)
    return markdown
