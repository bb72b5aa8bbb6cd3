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


def on_post_page(output, page, config):
    if MARKER not in output:
        return output
    tags = "".join(
        f'<script src="{get_relative_url(src, page.url)}"></script>' for src in SCRIPTS
    )
    head, body_end, tail = output.rpartition("</body>")
    return head + tags + body_end + tail if body_end else output + tags
