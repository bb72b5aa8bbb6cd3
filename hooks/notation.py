"""The notation page's table, and each note's first use of a symbol linked to its row.

``docs/notation.md`` keeps its symbols in its front matter (``symbols:``), one entry a
meaning: ``tex``, ``id`` (the row's anchor), ``means`` and ``notes`` (the slugs of the
notes that use the symbol that way). ``<!-- notation:table -->`` on that page becomes
the table. In each listed note, the first inline formula that is the symbol on its own
(``$p$``) or names its value (``$p = 4$``) is wrapped in a link to the row, after
Markdown and before ``hooks/typeset.py`` typesets it, so the link holds KaTeX's
output whole. Headings, code, and formulas already inside a link are left alone; a
formula in which the symbol is one term among others (``$2(p-1)$``) is not a use "on
its own" and is not linked.

A symbol listed twice for one note, a note slug that no note has, or two rows with
one anchor stop the build, naming the row.
"""

from __future__ import annotations

import html
import re

from mkdocs.exceptions import PluginError
from mkdocs.utils import get_relative_url
from mkdocs.utils.meta import get_data
from search_math import tex_to_text

PAGE = "notation.md"
POSTS_DIR = "blog/posts/"
MARKER = "<!-- notation:table -->"

INLINE = re.compile(r'<span class="arithmatex">\\\((.*?)\\\)</span>', re.S)
# where a symbol is not linked: headings, code, and what is already a link
SKIP = re.compile(r"<(h[1-6]|a|code|pre)\b[^>]*>.*?</\1>", re.S)

_symbols: list[dict] = []
_notes: dict[str, tuple[str, str]] = {}  # slug -> (src_uri, title)


def check(symbols: list, notes: dict) -> None:
    """The front matter's rows: each complete, anchors unique, notes real, and no
    note given two meanings of one symbol."""
    ids, meaning = set(), {}
    for i, row in enumerate(symbols):
        where = f"{PAGE}: symbols[{i}]"
        if not isinstance(row, dict) or not {"tex", "id", "means", "notes"} <= set(row):
            raise PluginError(f"{where} needs tex, id, means and notes")
        if row["id"] in ids:
            raise PluginError(f"{where}: id {row['id']!r} is used twice")
        ids.add(row["id"])
        for slug in row["notes"]:
            if slug not in notes:
                raise PluginError(f"{where} ({row['tex']}): no note has slug {slug!r}")
            other = meaning.setdefault((row["tex"], slug), row["id"])
            if other != row["id"]:
                raise PluginError(
                    f"{where}: note {slug!r} already means {other!r} by"
                    f" {row['tex']!r}; one meaning a note"
                )


def on_files(files, config):
    _notes.clear()
    page = None
    for f in files:
        if f.src_uri == PAGE:
            page = f
        elif f.src_uri.startswith(POSTS_DIR) and f.src_uri.endswith(".md"):
            _, meta = get_data(f.content_string)
            if meta.get("slug"):
                _notes[meta["slug"]] = (f.src_uri, str(meta.get("title", "")))
    _symbols[:] = []
    if page is not None:
        _, meta = get_data(page.content_string)
        _symbols[:] = meta.get("symbols") or []
        check(_symbols, _notes)
    return files


def table(symbols: list, notes: dict) -> str:
    """The rows as a Markdown table, from the notation page (docs/)."""
    lines = ["| symbol | stands for | in |", "| --- | --- | --- |"]
    for row in symbols:
        links = ", ".join(
            f"[{notes[s][1].split(':')[0]}]({notes[s][0]})" for s in row["notes"]
        )
        cell = f'<span id="{row["id"]}"></span>${row["tex"]}$'
        lines.append(f"| {cell} | {row['means']} | {links} |")
    return "\n".join(lines)


def names(tex: str, symbol: str) -> bool:
    """Whether a formula is the symbol on its own, or the symbol given a value."""
    tex = html.unescape(tex).strip()
    if tex == symbol:
        return True
    head, eq, _ = tex.partition("=")
    return bool(eq) and head.strip() == symbol


def link_first_uses(content: str, rows: list[dict], href: str) -> str:
    """``content`` (a page's HTML) with each row's first use on its own linked to
    ``href#id``; ``rows`` hold one meaning a symbol."""
    skipped = [m.span() for m in SKIP.finditer(content)]
    todo = {row["tex"]: row for row in rows}
    spans = []
    for m in INLINE.finditer(content):
        if any(a <= m.start() < b for a, b in skipped):
            continue
        row = next((todo[s] for s in list(todo) if names(m.group(1), s)), None)
        if row is not None:
            spans.append((m.start(), m.end(), todo.pop(row["tex"])))
    for start, end, row in reversed(spans):
        title = html.escape(
            f"{tex_to_text(row['tex'])}: {plain(row['means'])}", quote=True
        )
        content = (
            f'{content[:start]}<a class="cp-symbol" href="{href}#{row["id"]}"'
            f' title="{title}">{content[start:end]}</a>{content[end:]}'
        )
    return content


def plain(markdown: str) -> str:
    """A meaning as a tooltip says it: math as text, no backticks."""
    text = re.sub(r"\$([^$]+)\$", lambda m: tex_to_text(m.group(1)), markdown)
    return text.replace("`", "")


def on_page_markdown(markdown, page, config, files):
    if page.file.src_uri == PAGE and MARKER in markdown:
        markdown = markdown.replace(MARKER, table(_symbols, _notes))
    return markdown


def on_page_content(content, page, config, files):
    slug = page.meta.get("slug")
    if not page.file.src_uri.startswith(POSTS_DIR) or not slug:
        return content
    rows = [row for row in _symbols if slug in row["notes"]]
    target = files.get_file_from_path(PAGE)
    if not rows or target is None:
        return content
    return link_first_uses(content, rows, get_relative_url(target.url, page.url))
