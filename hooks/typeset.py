"""Math typeset at build time: a page holds KaTeX's HTML, not TeX for a script.

pymdownx.arithmatex leaves ``\\( … \\)`` and ``\\[ … \\]`` in their spans; the notebook
page's Markdown cells keep their ``$ … $`` and ``$$ … $$``. Each is replaced here by
the HTML that KaTeX (the npm package the site installs) makes of it, so the math is
there as soon as the page is, and no page loads KaTeX's JavaScript: only its
stylesheet and fonts (``hooks/vendor.py`` copies them, ``hooks/page_assets.py`` links
the stylesheet where a page holds math).

One Node process per build typesets every page's math, one page per request
(``hooks/typeset.js``). This runs after the search plugin has read each page, so the
index still sees the TeX that ``hooks/search_math.py`` turns into plain text. A formula
KaTeX cannot typeset fails the build, naming the page and the formula.
"""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
from pathlib import Path

from mkdocs.exceptions import PluginError

SCRIPT = Path(__file__).with_name("typeset.js")

# arithmatex's generic output: inline in a span, display in a div, TeX escaped for HTML
ARITHMATEX = re.compile(
    r'(<span class="arithmatex">)\\\((.*?)\\\)(</span>)'
    r'|(<div class="arithmatex">)\\\[(.*?)\\\](</div>)',
    re.S,
)
# a notebook's Markdown cell (its HTML holds no inner <div>), and the math in its text
NOTEBOOK_CELL = re.compile(
    r'(<div class="[^"]*\bjp-RenderedMarkdown\b[^"]*"[^>]*>)(.*?)(</div>)', re.S
)
CODE = re.compile(r"(<(pre|code)\b.*?</\2>)", re.S)
DOLLARS = re.compile(r"\$\$(.+?)\$\$|(?<![\\$])\$([^$\s](?:[^$]*?[^$\s])?)\$", re.S)


class Katex:
    """The Node process, started at the first page with math, ended with the build."""

    def __init__(self, node_modules: Path) -> None:
        self.katex = node_modules / "katex"
        self.proc: subprocess.Popen | None = None

    def render(self, items: list[tuple[str, bool]]) -> list[tuple[bool, str]]:
        if not items:
            return []
        if self.proc is None:
            node = shutil.which("node")
            if node is None:
                raise PluginError("typesetting math needs Node.js: install node")
            self.proc = subprocess.Popen(
                [node, str(SCRIPT), str(self.katex)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                encoding="utf-8",
            )
        self.proc.stdin.write(json.dumps(items) + "\n")
        self.proc.stdin.flush()
        answer = self.proc.stdout.readline()
        if not answer:
            error = self.proc.stderr.read().strip().splitlines()
            self.close()
            raise PluginError(f"KaTeX stopped: {error[-1] if error else 'no output'}")
        return [tuple(pair) for pair in json.loads(answer)]

    def close(self) -> None:
        if self.proc is not None:
            self.proc.stdin.close()
            self.proc.wait(timeout=10)
            self.proc = None


def typeset(page_html: str, render, where: str = "") -> str:
    """``page_html`` with every arithmatex span, and every ``$``-math in a notebook's
    Markdown cell, replaced by ``render``'s HTML (``render`` takes a list of
    ``(tex, display)`` and answers a list of ``(ok, html or message)``)."""
    found: list[tuple[str, bool]] = []

    def collect(tex: str, display: bool) -> str:
        found.append((html.unescape(tex.strip()), display))
        return f"\0{len(found) - 1}\0"  # a placeholder, filled in below

    def span(m: re.Match) -> str:
        if m.group(1):
            return m.group(1) + collect(m.group(2), False) + m.group(3)
        return m.group(4) + collect(m.group(5), True) + m.group(6)

    def dollars(text: str) -> str:
        return DOLLARS.sub(
            lambda m: (
                collect(m.group(1), True)
                if m.group(1) is not None
                else collect(m.group(2), False)
            ),
            text,
        )

    def cell(m: re.Match) -> str:
        parts = CODE.split(m.group(2))  # text, code, tag name, text, …
        body = "".join(
            dollars(p) if i % 3 == 0 else p for i, p in enumerate(parts) if i % 3 != 2
        )
        return m.group(1) + body + m.group(3)

    out = ARITHMATEX.sub(span, page_html)
    if "jupyter-wrapper" in out:
        out = NOTEBOOK_CELL.sub(cell, out)
    if not found:
        return page_html
    rendered = render(found)
    for (tex, _), (ok, message) in zip(found, rendered):
        if not ok:
            raise PluginError(f"{where}: KaTeX cannot typeset {tex!r}: {message}")
    return re.sub(r"\0(\d+)\0", lambda m: rendered[int(m.group(1))][1], out)


_katex: Katex | None = None


def on_config(config):
    global _katex
    node_modules = Path(config.config_file_path).resolve().parent / "node_modules"
    if not (node_modules / "katex").is_dir():
        raise PluginError("KaTeX missing: run 'npm ci' first (make site does it)")
    _katex = Katex(node_modules)
    return config


def on_post_page(output, page, config):
    return typeset(output, _katex.render, page.file.src_uri)


def on_post_build(config):
    _katex.close()


def on_build_error(error):
    if _katex is not None:
        _katex.close()
