"""Chart code only where there is a chart.

A page that holds a ``<figure class="cp-chart">`` (``snippets.core.results`` writes
them) gets the vendored Vega scripts and the site's ``charts.js`` at the end of its
body; every other page loads none of it (about 840 kB of JavaScript).
"""

from __future__ import annotations

from mkdocs.utils import get_relative_url

MARKER = '<figure class="cp-chart">'
# in load order: vega-lite and vega-embed read the globals the scripts before them set
SCRIPTS = [
    "assets/vendor/vega/vega.min.js",
    "assets/vendor/vega/vega-lite.min.js",
    "assets/vendor/vega/vega-embed.min.js",
    "assets/javascripts/charts.js",
]


# the model viewer (docs/assets/viewer/), likewise only where a note embeds one
VIEWER_MARKER = '<figure class="cp-viewer">'
DOM = "assets/javascripts/dom.js"  # the DOM builders the player and the viewer share
VIEWER_SCRIPTS = [
    "assets/vendor/dagre/dagre.min.js",
    DOM,
    "assets/sizing/formulas.js",  # the overlay's bytes are the calculator's
    "assets/viewer/overlay.js",
    "assets/viewer/viewer.js",
]
VIEWER_CSS = "assets/viewer/viewer.css"

# the sizing calculator (docs/assets/sizing/), only in the note that embeds it
SIZING_MARKER = '<figure class="cp-sizing"'
SIZING_SCRIPTS = [
    "assets/sizing/formulas.js",
    "assets/sizing/estimate.js",
    "assets/sizing/cli.js",
    "assets/sizing/render.js",
    "assets/sizing/widget.js",
]
SIZING_CSS = "assets/sizing/sizing.css"

# the trace animation player (docs/assets/player/), only where a note embeds one
PLAYER_MARKER = '<figure class="cp-player">'
PLAYER_SCRIPTS = [DOM, "assets/player/player.js"]
PLAYER_CSS = "assets/player/player.css"


def on_post_page(output, page, config):
    scripts = (SCRIPTS if MARKER in output else []) + (
        VIEWER_SCRIPTS if VIEWER_MARKER in output else []
    )
    scripts += SIZING_SCRIPTS if SIZING_MARKER in output else []
    scripts += PLAYER_SCRIPTS if PLAYER_MARKER in output else []
    scripts = list(
        dict.fromkeys(scripts)
    )  # a page with both loads the shared file once
    if not scripts:
        return output
    tags = "".join(
        f'<script src="{get_relative_url(src, page.url)}"></script>' for src in scripts
    )
    for marker, sheet in (
        (VIEWER_MARKER, VIEWER_CSS),
        (PLAYER_MARKER, PLAYER_CSS),
        (SIZING_MARKER, SIZING_CSS),
    ):
        if marker not in output:
            continue
        css = get_relative_url(sheet, page.url)
        output = output.replace(
            "</head>", f'<link rel="stylesheet" href="{css}"></head>', 1
        )
    head, body_end, tail = output.rpartition("</body>")
    return head + tags + body_end + tail if body_end else output + tags
