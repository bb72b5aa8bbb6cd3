"""Each page's scripts and stylesheets, from what it holds.

``page_assets.needs`` reads the one table of markers; this puts what it names into
the page: stylesheets at the end of ``<head>``, scripts at the end of ``<body>``. Paths
are relative to the page, so the site works from any folder and offline.
The site's own scripts load as modules, the vendored ones as classic scripts.
"""

from __future__ import annotations

from mkdocs.utils import get_relative_url
from page_assets import needs


def script_tag(src: str, path: str) -> str:
    """The site's own scripts are ES modules (they import one another, and run once
    the page is parsed); the vendored libraries are classic scripts that set the
    globals (``vegaEmbed``, ``dagre``) the modules then read."""
    kind = "" if path.startswith("assets/vendor/") else ' type="module"'
    return f'<script{kind} src="{src}"></script>'


def on_post_page(output, page, config):
    loads = needs(output)

    def url(path: str) -> str:
        return get_relative_url(path, page.url)

    links = "".join(f'<link rel="stylesheet" href="{url(s)}">' for s in loads.styles)
    output = output.replace("</head>", links + "</head>", 1)
    tags = "".join(script_tag(url(s), s) for s in loads.scripts)
    before, end, after = output.rpartition("</body>")
    return before + tags + end + after if end else output + tags
