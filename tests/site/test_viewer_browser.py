"""The model viewer in the built site, in Chromium, with every other host refused: it
renders collapsed, expands and collapses, searches, recolours under the parallelism
overlay, and logs no error; the overlay's bytes, in its table and on every marker
(DP and ZeRO ones on the modules, collapsed or open, too), equal the Python
overlay's and the sizing calculator's estimate(); on the tiny GPT with experts, each
expert box names the EP rank ExpertParallelMoE gives it, the two all-to-alls carry
the calculator's bytes, and an ep that does not divide dp is refused beside its
field. It stays legible: no text under
11 px on screen after "Expand all", on a desktop and on a phone; a toggle refits the
view around its module; the ranks table fits the note's column or scrolls as a
focusable region; the overlay has a key; each node's accessible name is its text.
And `view` pages of two models nobody here wrote, served over loopback: one with a
shared submodule, and nn.Transformer with a causal mask, drawn at module level."""

from __future__ import annotations

import functools
import http.server
import json
import os
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from browsing import url_of
from conftest import Quiet

from snippets.sizing import presets
from snippets.viewer.overlay_bytes import calculator, collectives, rank_bytes
from snippets.viewer.overlay_dp import dp_markers
from snippets.viewer.overlay_ep import calculator_model
from snippets.viewer.parallel_overlay import Degrees, check_degrees, ep_rank, mixtures

pytestmark = pytest.mark.browser

GRAPH = re.compile(r'<script type="application/json" class="cp-viewer__graph">(.*?)</')
START = re.compile(r'<script type="application/json" class="cp-viewer__start">(.*?)</')
FIGURE = re.compile(r'<figure class="cp-viewer">(.*?)</figure>', re.S)
FILL = "e => getComputedStyle(e.querySelector('rect')).fill"
MARKS = "els => els.flatMap(e => JSON.parse(e.dataset.colls))"
CELLS = "els => els.map(e => [e.dataset.col, Number(e.dataset.bytes)])"
# the smallest text of the graph as drawn on screen: font size × the zoom it is under
SMALLEST_TEXT = """() => Math.min(...[...document.querySelectorAll(
    'figure.cp-viewer svg.cp-viewer__svg text')].map(t =>
    parseFloat(getComputedStyle(t).fontSize) * t.getScreenCTM().a))"""
REPO = Path(__file__).resolve().parents[2]


def viewer_page(built_site: Path, slug: str, which: int = 0) -> tuple[Path, dict, dict]:
    """The note's page, the graph its ``which``-th viewer embeds and the degrees it
    opens at."""
    for html in sorted((built_site / "blog").glob(f"20*/**/{slug}/index.html")):
        figures = FIGURE.findall(html.read_text(encoding="utf-8"))
        if len(figures) > which:
            found, start = GRAPH.search(figures[which]), START.search(figures[which])
            first = json.loads(start.group(1)) if start else {}
            return html, json.loads(found.group(1).replace("<\\/", "</")), first
    pytest.fail(f"the note {slug!r} embeds no model viewer number {which}")


def set_degrees(page, d: Degrees) -> None:
    """``page``: the page, or one figure of it (a locator)."""
    names = ("dp", "tp", "pp", "cp", "zero", "sp")
    if page.locator('select[name="ep"]').count():  # a model with experts
        page.locator('select[name="ep"]').select_option("1")  # fits any dp
        names += ("ep",)
    for name in names:
        page.locator(f'select[name="{name}"]').select_option(str(int(getattr(d, name))))


def check_table(page, graph: dict, d: Degrees) -> list[dict]:
    """The page's bytes per rank equal the Python overlay's, cell by cell."""
    cells = page.locator(".cp-viewer__ranks td[data-col]").evaluate_all(CELLS)
    want = rank_bytes(graph, d)
    cols = len(cells) // len(want)
    assert cols * len(want) == len(cells)
    for s, row in enumerate(want):
        for col, value in cells[s * cols : (s + 1) * cols]:
            assert value == pytest.approx(row[col], rel=1e-12), (s, col)
    return want


def test_viewer_expands_searches_and_overlays_offline(
    open_page,
    served,
    built_site,
) -> None:
    html, graph, _ = viewer_page(built_site, "model-viewer")
    page = open_page()
    page.goto(url_of(served, built_site, html))
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
    set_degrees(page, d)
    assert ln_f.evaluate(FILL) != before  # stage 1's colour
    assert page.locator(".cp-edge--coll").count() > 0  # a collective is marked
    check_table(page, graph, d)
    assert not page.foreign, f"tried to fetch from other hosts: {page.foreign}"
    assert not page.errors, page.errors

    dark = open_page(scheme="dark")
    dark.goto(page.url)
    dark.locator('.cp-node[data-id="ln_f"]').wait_for(timeout=15000)
    assert dark.locator('.cp-node[data-id="ln_f"]').evaluate(FILL) != before
    assert not dark.errors, dark.errors


def test_the_overlays_bytes_equal_the_calculators(
    open_page,
    served,
    built_site,
) -> None:
    html, graph, start = viewer_page(built_site, "viewer-overlay")
    page = open_page()
    page.goto(url_of(served, built_site, html))
    fig = page.locator("figure.cp-viewer").first  # the dense GPT's; experts below
    fig.locator(".cp-node").first.wait_for(timeout=15000)
    assert start and fig.locator('select[name="tp"]').input_value() == str(start["tp"])
    check_table(fig, graph, Degrees(**start))  # it opened at the note's degrees
    dp = dp_markers(graph, Degrees(**start))  # collapsed: each block's DP total
    top = {m["id"] for m in graph["modules"] if m["parent"] == ""} & set(dp)
    shown = fig.locator(".cp-coll.cp-kind-dp").evaluate_all(MARKS)
    assert {at: b for at, _, _, b in shown} == {k: dp[k]["bytes"] for k in top}
    fig.get_by_role("button", name="Expand all").click()
    seq = graph["inputs"][0]["out"][0]["shape"][1]
    for d in (
        Degrees(dp=2, tp=2, pp=2, zero=1, sp=True),
        Degrees(dp=2, tp=2, pp=1, cp=2, zero=3),
        Degrees(dp=1, tp=2, pp=2, cp=2, zero=2, sp=True),
    ):
        set_degrees(fig, d)
        rows = check_table(fig, graph, d)
        marks = fig.locator(".cp-coll").evaluate_all(MARKS)
        shown = {(at, kind, name, b) for at, kind, name, b in marks}
        want = {
            (c["at"], c["kind"], c["name"], c["bytes"]) for c in collectives(graph, d)
        }
        assert shown == want, d  # every TP, SP, PP, CP and DP marker, with its bytes
        calc = calculator(presets.MODELS["tiny-gpt"], seq, d)
        top = max(rows, key=lambda r: r["weights"])
        comm, mem = calc["comm_bytes_per_step"], calc["memory_bytes"]
        for kind in ("tp", "cp", "dp"):
            assert top[kind] == pytest.approx(comm[kind], rel=1e-12), (d, kind)
        assert rows[0]["pp"] == pytest.approx(comm["pp"], rel=1e-12)
        assert top["weights"] == pytest.approx(mem["weights"], rel=1e-12)
        assert top["buffers"] == pytest.approx(mem["buffers"], rel=1e-12)
    assert not page.foreign, f"tried to fetch from other hosts: {page.foreign}"
    assert not page.errors, page.errors


def test_experts_their_ranks_and_all_to_alls(
    open_page,
    served,
    built_site,
) -> None:
    html, graph, start = viewer_page(built_site, "viewer-overlay", which=1)
    page = open_page()
    page.goto(url_of(served, built_site, html))
    fig = page.locator("figure.cp-viewer").nth(1)
    fig.locator(".cp-node").first.wait_for(timeout=15000)
    assert start["ep"] > 1 and fig.locator('select[name="ep"]').input_value() == str(
        start["ep"]
    )
    check_table(fig, graph, Degrees(**start))
    key = fig.locator(".cp-viewer__key").inner_text()
    assert "EP all-to-all" in key and "expert, on the EP rank" in key, key
    fig.get_by_role("button", name="Expand all").click()
    seq = graph["inputs"][0]["out"][0]["shape"][1]
    for d in (Degrees(**start), Degrees(dp=8, tp=2, zero=3, sp=True, ep=4)):
        set_degrees(fig, d)
        rows = check_table(fig, graph, d)
        for moe in mixtures(graph):  # each expert's box: the EP rank holding it
            n = len(moe["moe"]["experts"])
            for e, module in enumerate(moe["moe"]["experts"]):
                box = fig.locator(f'.cp-node[data-id="{module}"]')  # open: its head
                said = f"EP rank {ep_rank(e, n, d.ep)} of {d.ep}"
                assert said in box.text_content(), (module, said)
                box.focus()
                assert said in fig.locator(".cp-viewer__info").inner_text(), module
        marks = fig.locator(".cp-coll").evaluate_all(MARKS)
        shown = {(at, kind, name, b) for at, kind, name, b in marks}
        want = {
            (c["at"], c["kind"], c["name"], c["bytes"]) for c in collectives(graph, d)
        }
        assert shown == want, d  # the all-to-alls and every other marker
        assert {kind for _, kind, _, _ in shown} >= {"ep", "tp", "dp"}
        calc = calculator(calculator_model(graph), seq, d)
        top = max(rows, key=lambda r: r["weights"])
        for kind in ("tp", "dp", "ep"):
            comm = calc["comm_bytes_per_step"][kind]
            assert top[kind] == pytest.approx(comm, rel=1e-12), (d, kind)
    wrong = Degrees(dp=2, tp=2, ep=4)  # ep does not divide dp: said at the field
    set_degrees(fig, Degrees(dp=2, tp=2))
    fig.locator('select[name="ep"]').select_option("4")
    with pytest.raises(Exception) as refused:
        check_degrees(graph, wrong)
    error = fig.locator(".cp-viewer__error")
    assert error.inner_text() == f"{refused.value}; drawn at ep = 1"
    field = fig.locator('select[name="ep"]')
    assert field.get_attribute("aria-invalid") == "true"
    assert field.get_attribute("aria-describedby") == error.get_attribute("id")
    check_table(fig, graph, Degrees(dp=2, tp=2))
    assert not fig.locator(".cp-coll.cp-kind-ep").count()
    assert not page.foreign, f"tried to fetch from other hosts: {page.foreign}"
    assert not page.errors, page.errors


def in_view(page, selector: str) -> bool:
    """The element is in sight in the graph's viewport: all of its height, some of
    its width (a group may be wider than a phone)."""
    return page.locator(selector).evaluate(
        """e => { const s = e.closest('svg').getBoundingClientRect(),
        b = e.getBoundingClientRect();
        return b.top >= s.top && b.bottom <= s.bottom
          && b.right > s.left + 20 && b.left < s.right - 20; }"""
    )


@pytest.mark.parametrize("width", [1280, 390])
def test_the_viewer_is_legible_on_a_desktop_and_a_phone(
    open_page,
    served,
    built_site,
    width,
) -> None:
    html, graph, _ = viewer_page(built_site, "model-viewer")
    page = open_page(width=width)
    page.goto(url_of(served, built_site, html))
    page.locator("figure.cp-viewer .cp-node").first.wait_for(timeout=15000)
    assert page.evaluate(SMALLEST_TEXT) >= 11  # collapsed
    assert page.inner_text(".cp-viewer__info").strip()  # no empty panel under it
    for m in graph["modules"]:  # the name a screen reader says is the text shown
        if m["parent"] == "":
            name = f"▸ {m['name']} · {m['type']}"
            assert page.get_by_role("button", name=name).count() == 1, name

    set_degrees(page, Degrees(dp=2, tp=2, pp=2, cp=1, zero=3))
    key = page.locator(".cp-viewer__key")
    text = key.inner_text()
    for item in ("stage 0", "stage 1", "TP column split", "TP row split", "ZeRO-3"):
        assert item in text, (item, text)
    swatch = "e => getComputedStyle(e.querySelector('svg rect')).fill"
    stage1 = key.locator(".cp-viewer__keyitem", has_text="stage 1").evaluate(swatch)
    assert stage1 == page.locator('.cp-node[data-id="ln_f"]').evaluate(FILL)
    region = page.locator(".cp-viewer__ranks")
    client, scroll = region.evaluate("e => [e.clientWidth, e.scrollWidth]")
    if width >= 1280:  # the note's column holds every column, "DP sent" included
        assert scroll <= client, (scroll, client)
    assert region.get_attribute("tabindex") == "0"  # scrolls by keyboard if it must
    assert region.get_attribute("role") == "region" and region.get_attribute(
        "aria-label"
    )

    page.locator('.cp-node[data-id="blocks"]').click()  # refit around it
    page.locator('.cp-node[data-id="blocks.0"]').click()
    page.wait_for_selector('.cp-node[data-id="blocks.0.attn"]')
    for shown in ('.cp-node--head[data-id="blocks"]', '.cp-node[data-id="blocks.0"]'):
        assert in_view(page, shown), shown  # the module and the head above it
    page.get_by_role("button", name="Expand all").click()
    page.wait_for_selector('.cp-node[data-id="blocks.1.attn.q"]')
    assert page.evaluate(SMALLEST_TEXT) >= 11
    assert not page.errors, page.errors


@pytest.fixture(scope="module")
def user_pages(tmp_path_factory):
    """`view` run as a user runs it on two models of tests/viewer/test_module_graph.py,
    the folder served over loopback: {name: url}."""
    root = tmp_path_factory.mktemp("user-views")
    env = {**os.environ, "PYTHONPATH": str(REPO / "tests" / "viewer")}
    runs = {
        "shared": ["test_module_graph:SharedBlocks", "--input-shape", "2,5,8"],
        "transformer": [
            "test_module_graph:transformer",
            "--example",
            "test_module_graph:transformer_inputs",
        ],
    }
    for name, argv in runs.items():
        cmd = [sys.executable, "-m", "snippets", "view", *argv, "--out", root / name]
        proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
    handler = functools.partial(Quiet, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}/"
    yield {name: f"{base}{name}/index.html" for name in runs}
    server.shutdown()


def test_a_model_with_a_shared_submodule(open_page, user_pages) -> None:
    page = open_page()
    page.goto(user_pages["shared"])
    shared = page.locator('.cp-node[data-id="shared"]')
    shared.wait_for(timeout=15000)
    assert "shared = blocks.0 · Mixer" in shared.text_content()  # once, both names
    page.locator('.cp-node[data-id="blocks"]').click()
    page.wait_for_selector('.cp-node[data-id="blocks.1"]')
    assert page.locator('.cp-node[data-id="blocks.0"]').count() == 0
    shared.click()
    assert "also named: blocks.0" in page.inner_text(".cp-viewer__info")
    page.get_by_role("button", name="Expand all").click()
    assert page.evaluate(SMALLEST_TEXT) >= 11
    assert not page.foreign and not page.errors, (page.foreign, page.errors)


def test_nn_transformer_with_a_causal_mask_at_module_level(
    open_page,
    user_pages,
) -> None:
    page = open_page()
    page.goto(user_pages["transformer"])
    page.locator('.cp-node[data-id="decoder"]').wait_for(timeout=15000)
    note = page.inner_text(".cp-viewer__level")
    assert note.startswith("Graph at module level") and "transformer.py" in note
    drawn = page.locator(".cp-viewer__svg")
    assert "tgt_mask 5×5" in drawn.text_content()  # the mask, an input
    page.locator('.cp-node[data-id="decoder"]').click()
    page.locator('.cp-node[data-id="decoder.layers"]').click()
    page.locator('.cp-node[data-id="decoder.layers.0"]').click()
    page.locator('.cp-node[data-id="decoder.layers.0.self_attn"]').click()
    call = page.locator('.cp-node[data-id="decoder.layers.0.self_attn()"]')
    call.wait_for()  # one call of the module, with the shape it returned
    assert call.text_content() == "MultiheadAttention 5×2×16"
    page.get_by_role("button", name="Expand all").click()
    assert page.evaluate(SMALLEST_TEXT) >= 11
    assert not page.foreign and not page.errors, (page.foreign, page.errors)
