"""What a page loads, decided by what it holds: the one table.

Each row names a marker (text the built page holds, or a pattern it matches) and the
scripts and stylesheets a page with that marker needs, paths under the site's root
in load order. ``hooks/pages.py`` puts exactly these into each page, and nothing
else: a page without a chart loads no Vega (about 840 kB), one without math no KaTeX
stylesheet. Math and diagrams need no script: ``hooks/typeset.py`` typesets math at
build time, and the notes draw their diagrams as inline SVG. The standalone model
viewer (``snippets/viewer/viewer_page.py``) reads its scripts from the same row.

The markers are the contract with what writes the figures: ``snippets.core.results``
(charts), ``snippets.core.player`` (players), ``snippets.viewer.viewer_page``
(model viewers), ``snippets.sizing.sizing_widget`` (the calculator),
``snippets.exercises.predictions`` (prediction questions), and KaTeX's HTML, which
``hooks/typeset.py`` writes for arithmatex's spans and for the ``$…$`` of notebook
Markdown cells.

Standard library only: the viewer's CLI reads it without mkdocs installed.
"""

from __future__ import annotations

import re
from typing import NamedTuple


class Needs(NamedTuple):
    scripts: tuple[str, ...] = ()
    styles: tuple[str, ...] = ()


DOM = "assets/javascripts/dom.js"  # the DOM builders the player and the viewer share
FORMULAS = "assets/sizing/formulas.js"  # the calculator's; the viewer's bytes too

ASSETS: tuple[tuple[str | re.Pattern, Needs], ...] = (
    # math typeset at build time (hooks/typeset.py): KaTeX's stylesheet, no script
    ('<span class="katex">', Needs(styles=("assets/vendor/katex/katex.min.css",))),
    (
        '<figure class="cp-chart">',
        # vega-lite and vega-embed read the globals the scripts before them set
        Needs(
            scripts=(
                "assets/vendor/vega/vega.min.js",
                "assets/vendor/vega/vega-lite.min.js",
                "assets/vendor/vega/vega-embed.min.js",
                "assets/javascripts/charts.js",
            )
        ),
    ),
    (
        '<figure class="cp-viewer">',
        Needs(
            scripts=(
                "assets/vendor/dagre/dagre.min.js",
                DOM,
                FORMULAS,
                "assets/viewer/overlay.js",
                "assets/viewer/viewer.js",
            ),
            styles=("assets/viewer/viewer.css",),
        ),
    ),
    (
        '<figure class="cp-sizing"',  # the calculator's figure carries an id
        Needs(
            scripts=(
                FORMULAS,
                "assets/sizing/estimate.js",
                "assets/sizing/cli.js",
                "assets/sizing/render.js",
                "assets/sizing/widget.js",
            ),
            styles=("assets/sizing/sizing.css",),
        ),
    ),
    (
        '<figure class="cp-player">',
        Needs(
            scripts=(DOM, "assets/player/player.js"),
            styles=("assets/player/player.css",),
        ),
    ),
    (
        '<form class="cp-predict"',  # snippets.exercises.predictions
        Needs(
            scripts=("assets/predict/predict.js",),
            styles=("assets/predict/predict.css",),
        ),
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
