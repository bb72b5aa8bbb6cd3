"""What a page loads, decided by what it holds.

Each row names a marker (text the built page holds, or a pattern it matches) and the
scripts and stylesheets a page with that marker needs, paths under the site's root
in load order. ``hooks/pages.py`` puts exactly these into each page, and nothing
else: a page without a chart loads no Vega (about 840 kB), one without math no KaTeX
stylesheet. Math and diagrams need no script: ``hooks/typeset.py`` typesets math at
build time, and the notes draw their diagrams as inline SVG.

The rows of the figures come from the one table of kinds, ``snippets/render/kinds.py``,
whose markers the renderer (``snippets/render``) writes; the row here is KaTeX's HTML,
which ``hooks/typeset.py`` writes for arithmatex's spans and for the ``$…$`` of
notebook Markdown cells.

Standard library only, and so is the table it reads (by path, not importing
``snippets``, which would import torch).
"""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from typing import NamedTuple

KINDS_FILE = Path(__file__).resolve().parents[1] / "snippets" / "render" / "kinds.py"


def _kinds():
    spec = importlib.util.spec_from_file_location("cp_render_kinds", KINDS_FILE)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # NamedTuple looks its module up while it builds
    spec.loader.exec_module(module)
    return module.KINDS


class Needs(NamedTuple):
    scripts: tuple[str, ...] = ()
    styles: tuple[str, ...] = ()


KINDS = _kinds()
ASSETS: tuple[tuple[str | re.Pattern, Needs], ...] = (
    # math typeset at build time (hooks/typeset.py): KaTeX's stylesheet, no script
    ('<span class="katex">', Needs(styles=("assets/vendor/katex/katex.min.css",))),
    *(
        (kind.marker, Needs(kind.scripts, kind.styles))
        for kind in KINDS.values()
        if kind.scripts or kind.styles
    ),
)


def holds(html: str, marker: str | re.Pattern) -> bool:
    if isinstance(marker, str):
        return marker in html
    return marker.search(html) is not None


class Loads(NamedTuple):
    styles: tuple[str, ...]  # at the end of <head>
    scripts: tuple[str, ...]  # at the end of <body>


def needs(html: str) -> Loads:
    """Everything a page holding ``html`` loads, each file once, in the table's order
    (a file two rows share loads where the first of them puts it)."""
    rows = [row for marker, row in ASSETS if holds(html, marker)]

    def once(files) -> tuple[str, ...]:
        return tuple(dict.fromkeys(files))

    return Loads(
        styles=once(s for row in rows for s in row.styles),
        scripts=once(s for row in rows for s in row.scripts),
    )
