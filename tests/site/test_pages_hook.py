"""hooks/pages.py and its table, hooks/page_assets.py: a page gets each file its markers
need once, where it works, by a path relative to the page; the figures the snippets
write carry the markers the table knows."""

from __future__ import annotations

import posixpath
import re
from types import SimpleNamespace

from conftest import load_hook

pages = load_hook("pages")
table = load_hook("page_assets")

URL = "blog/2026/01/02/a-note/"  # five folders deep: paths start ../../../../../
BUNDLE = '<script src="../../../../../assets/javascripts/bundle.5f3a.min.js"></script>'
PAGE = "<html><head><title>t</title></head><body>{body}" + BUNDLE + "</body></html>"
# the site's own scripts are modules, the vendored ones and Material's classic scripts
SRC = re.compile(r'<script (?:type="module" )?src="([^"]+)"')
EVERY_MARKER = (
    '<figure class="cp-chart"></figure><figure class="cp-player"></figure>'
    '<figure class="cp-viewer"></figure><figure class="cp-sizing" id="calculator">'
    '</figure><span class="arithmatex"><span class="katex">x</span></span>'
    '<form class="cp-predict"></form>'
)


def served(body: str) -> str:
    return pages.on_post_page(PAGE.format(body=body), SimpleNamespace(url=URL), None)


def site_path(ref: str) -> str:
    """The file under the site's root that a reference from the page points at."""
    return posixpath.normpath(posixpath.join(URL, ref))


def test_a_page_without_markers_is_left_as_it_is() -> None:
    body = '<p>class="cp-chart" is named here, not held: no figure</p>'
    assert served(body) == PAGE.format(body=body)


def test_every_file_loads_once_in_the_tables_order_where_it_works() -> None:
    assert all(table.holds(EVERY_MARKER, m) for m, _ in table.ASSETS)
    out = served(EVERY_MARKER)
    head, body = out.split("</head>")
    srcs = [site_path(s) for s in SRC.findall(out)]
    hrefs = [site_path(h) for h in re.findall(r'<link [^>]*href="([^"]+)"', head)]
    scripts = [f for _, row in table.ASSETS for f in row.scripts]
    styles = [f for _, row in table.ASSETS for f in row.styles]
    assert len(set(scripts)) < len(scripts)  # rows share files: each loads once
    bundle = srcs.index("assets/javascripts/bundle.5f3a.min.js")
    assert srcs[bundle + 1 :] == list(dict.fromkeys(scripts))  # after Material's
    assert hrefs == list(dict.fromkeys(styles)) and "<link" not in body


def test_a_page_loads_only_the_rows_it_holds() -> None:
    out = served('<figure class="cp-player"></figure>')
    srcs = {site_path(s) for s in SRC.findall(out)}
    row = dict(table.ASSETS)['<figure class="cp-player"']
    assert srcs == {*row.scripts, "assets/javascripts/bundle.5f3a.min.js"}


def test_each_figure_a_snippet_writes_holds_one_marker_of_the_table() -> None:
    """The markers are the figures' contract with the page: a renamed class would
    leave a figure without its scripts."""
    from snippets.core import parts
    from snippets.render import fragments, render
    from snippets.sizing.sizing_widget import widget_data

    module = {"id": "", "name": "M", "type": "M", "parent": None, "params": 3}
    module |= {"bytes": 12, "flops": 0, "tensors": []}
    graph = {"model": "M", "source": "torch.fx", "modules": [module], "ops": []}
    figures = [
        fragments.chart({"title": "t", "data": {"values": [{"x": 1}]}}),
        render(parts.player({"title": "t", "frames": []})),
        render(parts.viewer(graph)),
        render(parts.sizing(widget_data())),
        render(parts.prediction("q", "How many?", "bytes", 2.0, "so", "here")),
    ]
    found = [[m for m, _ in table.ASSETS if table.holds(f, m)] for f in figures]
    assert all(len(markers) == 1 for markers in found), found
    assert len({markers[0] for markers in found}) == len(figures)


def test_math_and_diagrams_load_no_script() -> None:
    """Math arrives typeset (hooks/typeset.py) and diagrams as inline SVG: a page with
    both loads KaTeX's stylesheet and no script at all of its own."""
    body = (
        '<span class="arithmatex"><span class="katex">x</span></span>'
        '<figure class="cp-figure"><svg class="cp-diagram"></svg></figure>'
    )
    out = served(body)
    assert SRC.findall(out) == ["../../../../../assets/javascripts/bundle.5f3a.min.js"]
    hrefs = [site_path(h) for h in re.findall(r'<link [^>]*href="([^"]+)"', out)]
    assert hrefs == ["assets/vendor/katex/katex.min.css"]
    assert not any("mermaid" in f for _, row in table.ASSETS for f in row.scripts)
