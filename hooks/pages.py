"""Each page's scripts and stylesheets, from what it holds.

``page_assets.needs`` reads the one table of markers; this puts what it names into
the page: stylesheets at the end of ``<head>``, mermaid just before Material's bundle
(which fetches its own from a CDN when mermaid is not defined yet), every other
script at the end of ``<body>``. Paths are relative to the page, so the site works
from any folder and offline.
"""

from __future__ import annotations

import re

from mkdocs.utils import get_relative_url
from page_assets import needs

BUNDLE = re.compile(r'(<script src="[^"]*assets/javascripts/bundle\.[^"]*"></script>)')


def on_post_page(output, page, config):
    loads = needs(output)

    def url(path: str) -> str:
        return get_relative_url(path, page.url)

    if loads.early:
        early = "".join(f'<script src="{url(s)}"></script>' for s in loads.early)
        output = BUNDLE.sub(lambda m: early + m.group(1), output, count=1)
    links = "".join(f'<link rel="stylesheet" href="{url(s)}">' for s in loads.styles)
    output = output.replace("</head>", links + "</head>", 1)
    tags = "".join(f'<script src="{url(s)}"></script>' for s in loads.scripts)
    before, end, after = output.rpartition("</body>")
    return before + tags + end + after if end else output + tags
