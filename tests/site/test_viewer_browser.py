"""The model viewer in the built site, in Chromium, with every other host refused: it
renders collapsed, expands and collapses, searches, recolours under the parallelism
overlay, shows the same bytes per rank as the Python rules, and logs no error."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from test_browser import browser, note_url, open_page, served  # noqa: F401 - fixtures

from snippets.viewer.parallel_overlay import Degrees, rank_bytes

pytestmark = pytest.mark.browser

GRAPH = re.compile(r'<script type="application/json" class="cp-viewer__graph">(.*?)</')
FILL = "e => getComputedStyle(e.querySelector('rect')).fill"


def viewer_page(built_site: Path) -> tuple[Path, dict]:
    for html in sorted((built_site / "blog").glob("20*/**/index.html")):
        found = GRAPH.search(html.read_text(encoding="utf-8"))
        if found:
            return html, json.loads(found.group(1).replace("<\\/", "</"))
    pytest.fail("no note embeds the model viewer")


def test_viewer_expands_searches_and_overlays_offline(
    open_page,  # noqa: F811
    served,  # noqa: F811
    built_site,
) -> None:
    html, graph = viewer_page(built_site)
    page = open_page()
    page.goto(note_url(served, built_site, 'class="cp-viewer__graph"'))
    nodes = page.locator("figure.cp-viewer .cp-node")
    nodes.first.wait_for(timeout=15000)
    top = {m["id"] for m in graph["modules"] if m["parent"] == ""}
    shown = set(nodes.evaluate_all("els => els.map(e => e.dataset.id)"))
    assert top <= shown and not any(s.startswith("blocks.") for s in shown)
    collapsed = nodes.count()

    page.locator('.cp-node[data-id="blocks"]').click()  # expand
    page.locator('.cp-node[data-id="blocks.0"]').focus()
    page.keyboard.press("Enter")  # by keyboard
    page.wait_for_selector('.cp-node[data-id="blocks.0.attn"]')
    assert nodes.count() > collapsed
    assert "blocks.0" in page.inner_text(".cp-viewer__info")
    page.locator('.cp-node--head[data-id="blocks"]').click()  # collapse
    page.wait_for_function(
        f"document.querySelectorAll('.cp-node').length == {collapsed}"
    )

    page.fill(".cp-viewer__search", "scaled_dot")
    sdpa = sum("scaled_dot_product" in op["op"] for op in graph["ops"])
    assert page.inner_text(".cp-viewer__found") == f"{sdpa} found"
    assert page.locator(".cp-node.cp-match").count() == sdpa
    page.fill(".cp-viewer__search", "")

    ln_f = page.locator('.cp-node[data-id="ln_f"]')
    before = ln_f.evaluate(FILL)
    d = Degrees(dp=2, tp=2, pp=2, cp=1, zero=1)
    for name in ("dp", "tp", "pp", "zero"):
        page.select_option(f'select[name="{name}"]', str(getattr(d, name)))
    assert ln_f.evaluate(FILL) != before  # stage 1's colour
    assert page.locator(".cp-edge--coll").count() > 0  # a collective is marked
    cells = page.locator(".cp-viewer__ranks td[data-col]").evaluate_all(
        "els => els.map(e => [e.dataset.col, Number(e.dataset.bytes)])"
    )
    want = rank_bytes(graph, d)
    cols = len(cells) // len(want)
    for s, row in enumerate(want):
        for col, value in cells[s * cols : (s + 1) * cols]:
            assert value == pytest.approx(row[col], rel=1e-12), (s, col)
    assert not page.foreign, f"tried to fetch from other hosts: {page.foreign}"
    assert not page.errors, page.errors

    dark = open_page(scheme="dark")
    dark.goto(page.url)
    dark.locator('.cp-node[data-id="ln_f"]').wait_for(timeout=15000)
    assert dark.locator('.cp-node[data-id="ln_f"]').evaluate(FILL) != before
    assert not dark.errors, dark.errors
