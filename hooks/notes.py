"""Lists made from the notes themselves, never kept by hand.

* ``docs/sitemap.md``: ``<!-- notes:by-series -->`` and ``<!-- notes:by-date -->``
  become every note, grouped by series and by month.
* ``docs/index.md``: ``<!-- notes:start -->`` (a button to the first note of the
  first series), ``<!-- notes:series -->`` (each series once: its note count, counted
  here, the line the page's front matter ``series:`` gives it, where it starts, its
  page and its feed) and ``<!-- notes:latest -->`` (the newest notes).
* every note says "part N of M" of its series under its title, and its page footer's
  previous / next are the series' neighbours (not the blog's, by date): one "next".
* each series page lists its notes in the series' order, on one page.
* ``<!-- repo_url -->`` anywhere becomes the repository's address (``repo_url``), or,
  when the build knows none, ``REPOSITORY-URL`` (hooks/repo_links.py finds no link
  it could trust, and the page does not invent one).

A note is ``docs/blog/posts/*.md``; its series is its first category, its date the
scalar ``date:`` of its front matter (when it was written), and ``part: N`` its place
in the series, the order a reader takes: every series runs 1, 2, … with no gap and no
part twice, or the build stops naming the file. Lists by date break a day's ties by
series, then part, never by file name.
"""

from __future__ import annotations

import datetime
import posixpath
from dataclasses import dataclass
from itertools import groupby

from material.plugins.blog.structure import Category
from mkdocs.exceptions import PluginError
from mkdocs.plugins import event_priority
from mkdocs.utils import get_relative_url
from mkdocs.utils.meta import get_data

POSTS_DIR = "blog/posts/"
LATEST = 5
NO_REPO = "REPOSITORY-URL"


@dataclass(frozen=True)
class Note:
    src_uri: str
    title: str
    date: datetime.date
    series: str
    description: str
    part: int


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
        part = meta.get("part")
        if type(part) is not int or part < 1:
            raise PluginError(
                f"{f.src_uri}: front matter needs 'part: N' (N = 1, 2, …), its place"
                f" in the series '{meta['categories'][0]}'"
            )
        notes.append(
            Note(
                f.src_uri,
                meta["title"],
                date,
                meta["categories"][0],
                meta.get("description", ""),
                part,
            )
        )
    check_parts(notes)
    first = {}
    for n in sorted(notes, key=lambda n: n.date):
        first.setdefault(n.series, n.date)
    rank = {s: i for i, s in enumerate(sorted(first, key=lambda s: (first[s], s)))}
    _notes[:] = sorted(notes, key=lambda n: (n.date, rank[n.series], n.part))
    return files


def check_parts(notes: list[Note]) -> None:
    """Every series' parts are 1, 2, …, n: no part twice and no gap."""
    for series in dict.fromkeys(n.series for n in notes):
        same = sorted((n for n in notes if n.series == series), key=lambda n: n.part)
        for i, note in enumerate(same, 1):
            if i > 1 and note.part == same[i - 2].part:
                raise PluginError(
                    f"{note.src_uri}: part {note.part} of '{series}' is also"
                    f" {same[i - 2].src_uri}'s; each part number once"
                )
            if note.part != i:
                raise PluginError(
                    f"{note.src_uri}: part {note.part} of '{series}' leaves a gap"
                    f" (expected part {i}; the {len(same)} parts run 1 to {len(same)})"
                )


def _link(note: Note, from_uri: str) -> str:
    rel = posixpath.relpath(note.src_uri, posixpath.dirname(from_uri) or ".")
    return f"[{note.title}]({rel})"


def _line(note: Note, from_uri: str) -> str:
    return f"- {note.date:%Y-%m-%d} · {_link(note, from_uri)}"


def _series_order() -> list[str]:
    return list(
        dict.fromkeys(n.series for n in _notes)
    )  # in order of each series' first note written


def by_series(from_uri: str) -> str:
    parts = []
    for series in _series_order():
        parts.append(f"### {series}\n")
        parts += [_line(n, from_uri) for n in series_notes(series)]
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


def start_link(from_uri: str) -> str:
    """A button to part 1 of the first series written: where a newcomer begins."""
    order = _series_order()
    if not order:
        return ""
    first = series_notes(order[0])[0]
    rel = posixpath.relpath(first.src_uri, posixpath.dirname(from_uri) or ".")
    return (
        f"[Start reading: {first.title} →]({rel})"
        "{ .md-button .md-button--primary .cp-start }"
    )


def series_list(from_uri: str, page=None, config=None) -> str:
    """Each series once: how many notes, what it is about (``series:`` in the page's
    front matter, by series name), where it starts, its page and its feed."""
    about = (page.meta.get("series") if page is not None else None) or {}
    lines = []
    for series in _series_order():
        notes = series_notes(series)
        what = f" {about[series].strip()}" if about.get(series) else ""
        extra = ""
        if page is not None and config is not None:
            here = page.url
            slug = series_url(series, config).rstrip("/").rsplit("/", 1)[1]
            extra = (
                f' · <a href="{get_relative_url(series_url(series, config), here)}">'
                "all of it, in order</a> · "
                f'<a href="{get_relative_url(f"feeds/{slug}.xml", here)}">its feed</a>'
            )
        lines.append(
            f"- **{series}**, {len(notes)} note{'s' if len(notes) != 1 else ''}."
            f"{what} Start with {_link(notes[0], from_uri)}{extra}"
        )
    return "\n".join(lines)


def series_notes(series: str) -> list[Note]:
    """A series' notes in the order a reader takes them (its parts)."""
    return sorted((n for n in _notes if n.series == series), key=lambda n: n.part)


def series_of(note: Note) -> list[Note]:
    return series_notes(note.series)


def series_url(series: str, config) -> str:
    """The blog plugin's page for a category, e.g. blog/category/sizing/."""
    blog = config.plugins["material/blog"].config
    slug = blog.categories_slugify(series, blog.categories_slugify_separator)
    return f"blog/{blog.categories_url_format.format(slug=slug)}/"


def part_line(note: Note) -> str:
    same = series_of(note)
    return (
        f'<p class="cp-part">Part {same.index(note) + 1} of {len(same)} in the series'
        f" <em>{note.series}</em></p>"
    )


def series_nav(note: Note, page, config) -> str:
    same = series_of(note)
    href = get_relative_url(series_url(note.series, config), page.url)
    return (
        f'\n\n<nav class="cp-series-nav" aria-label="{note.series}"><span>Part'
        f" {same.index(note) + 1} of {len(same)} in"
        f' <a href="{href}">{note.series}</a>, read in this order.</span>'
        "<span>Next and previous below stay in this series.</span></nav>\n"
    )


def with_part(markdown: str, note: Note) -> str:
    """The "part N of M" line right under the note's title (so excerpts show it)."""
    lead = len(markdown) - len(markdown.lstrip())
    if not markdown.startswith("# ", lead):
        return part_line(note) + "\n\n" + markdown
    title, nl, body = markdown.partition("\n")
    return f"{title}{nl}\n{part_line(note)}\n{body}"


@event_priority(-60)  # after the blog plugin's on_nav (-50), which links by date
def on_nav(nav, config, files):
    """Footer links by series; series pages in the series' order."""
    pages = {f.src_uri: f.page for f in files if f.src_uri.startswith(POSTS_DIR)}
    for note in _notes:
        same = series_of(note)
        i = same.index(note)
        page = pages[note.src_uri]
        page.previous_page = pages[same[i - 1].src_uri] if i > 0 else None
        page.next_page = pages[same[i + 1].src_uri] if i + 1 < len(same) else None
    part = {n.src_uri: n.part for n in _notes}
    for f in files:
        if isinstance(f.page, Category):
            f.page.posts.sort(key=lambda p: part[p.file.src_uri])
    return nav


def on_page_markdown(markdown, page, config, files):
    uri = page.file.src_uri
    replacements = {
        "<!-- notes:by-series -->": by_series,
        "<!-- notes:by-date -->": by_date,
        "<!-- notes:latest -->": latest,
        "<!-- notes:series -->": series_list,
        "<!-- notes:start -->": start_link,
    }
    for marker, make in replacements.items():
        if marker in markdown:
            args = (uri, page, config) if make is series_list else (uri,)
            markdown = markdown.replace(marker, make(*args))
    markdown = markdown.replace("<!-- repo_url -->", config.repo_url or NO_REPO)
    note = next((n for n in _notes if n.src_uri == uri), None)
    if note is not None:
        markdown = with_part(markdown, note) + series_nav(note, page, config)
    return markdown
