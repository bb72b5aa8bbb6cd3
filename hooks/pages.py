"""Each page's scripts and stylesheets, from what it holds.

``page_assets.needs`` reads the one table of markers; this puts what it names into
the page: stylesheets at the end of ``<head>``, scripts at the end of ``<body>``. Paths
are relative to the page, so the site works from any folder and offline.
"""

from __future__ import annotations

from mkdocs.utils import get_relative_url
from page_assets import needs


def on_post_page(output, page, config):
    loads = needs(output)

    def url(path: str) -> str:
        return get_relative_url(path, page.url)

    links = "".join(f'<link rel="stylesheet" href="{url(s)}">' for s in loads.styles)
    output = output.replace("</head>", links + "</head>", 1)
    tags = "".join(f'<script src="{url(s)}"></script>' for s in loads.scripts)
    before, end, after = output.rpartition("</body>")
    return before + tags + end + after if end else output + tags
