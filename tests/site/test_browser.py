"""The built site in a real browser with every other host unreachable: math and
diagrams are there before any script runs, search answers, code fits its block, charts
draw, answer the mouse, write bytes and times in their units with titles on one line,
and stay legible on a phone in both schemes, and no page even tries to fetch
elsewhere."""

from __future__ import annotations

import re
from urllib.parse import urlsplit

import pytest
from browsing import (
    chart_pages,
    contrast,
    every_page,
    note_url,
    url_of,
    wait_for_charts,
)
from conftest import load_hook

pytestmark = [pytest.mark.browser, pytest.mark.long]

# Each formula and diagram as drawn: its size, and the font KaTeX's text is set in.
DRAWN = """() => [...document.querySelectorAll('.katex, svg.cp-diagram')].map(e => {
  const r = e.getBoundingClientRect(), t = e.querySelector('.mord, text');
  return [e.tagName, r.width, r.height, t ? getComputedStyle(t).fontFamily : ''];
})"""
# A diagram's text colour, and the first colour behind it that is not transparent.
DIAGRAM_COLOURS = """() => {
  const text = document.querySelector('svg.cp-diagram text');
  let el = text.closest('figure'), bg = 'rgba(0, 0, 0, 0)';
  while (el && /rgba\\(.*, 0\\)|transparent/.test(bg)) {
    bg = getComputedStyle(el).backgroundColor; el = el.parentElement;
  }
  return [getComputedStyle(text).fill, bg];
}"""


@pytest.mark.parametrize("scheme, javascript", [("light", False), ("dark", True)])
def test_math_and_diagrams_are_drawn_with_no_script_at_all(
    open_page, served, built_site, scheme, javascript
) -> None:
    """With JavaScript off, the ring note shows typeset math and its ring, and the
    trees note its two trees: no TeX in the text a reader sees, KaTeX's own fonts
    (from this site), diagrams with size and their text legible on the page (the dark
    scheme needs Material's script to switch)."""
    page = open_page(scheme=scheme, javascript=javascript)
    for slug, diagrams in [("ring-allreduce", 1), ("trees-and-halving-doubling", 2)]:
        (html,) = built_site.glob(f"blog/*/*/*/{slug}/index.html")
        page.goto(url_of(served, built_site, html), wait_until="load")
        page.evaluate("document.fonts.ready.then(() => true)")
        text = page.inner_text("article")
        assert not re.search(r"\\[(\[]|\\frac|\$\$", text), slug
        drawn = page.evaluate(DRAWN)
        math = [d for d in drawn if d[0] == "SPAN"]
        svgs = [d for d in drawn if d[0] == "svg"]
        assert math and all(w > 0 and h > 0 for _, w, h, _ in math), slug
        assert all("KaTeX_" in font for *_, font in math if font), slug
        assert len(svgs) == diagrams and all(h > 100 for _, _, h, _ in svgs), slug
        fg, bg = page.evaluate(DIAGRAM_COLOURS)
        assert contrast(fg, bg) >= 4.5, (slug, fg, bg)
    fonts = [u for u in page.requested if "/katex/fonts/" in u]
    assert fonts and not page.foreign, (fonts, page.foreign)
    assert not page.errors, page.errors
    if not javascript:
        assert not [u for u in page.requested if u.endswith(".js")], page.requested


def test_search_works_offline(page, served) -> None:
    page.goto(served)
    page.click("input.md-search__input")
    page.keyboard.type("rank")
    page.wait_for_selector(".md-search-result__item", timeout=20000)
    assert page.locator(".md-search-result__item").count() > 0
    assert not page.foreign, f"tried to fetch from other hosts: {page.foreign}"


# For each code block that scrolls: its place, its widths, its first line. The block
# that scrolls is the <code> inside a <pre>, or the <pre> itself (notebook cells).
OVERFLOWING_CODE = """() => [...document.querySelectorAll(
    'pre > code, pre:not(:has(> code))')]
  .map((c, i) => [i, c.scrollWidth, c.clientWidth, c.textContent.split('\\n')[0]])
  .filter(([i, scroll, client]) => scroll > client)"""


def test_every_page_offline_loads_what_it_needs_no_code_scrolls(
    page, served, built_site
) -> None:
    """One visit per page (there are many) checks three things: nothing asked of
    another host, exactly the files hooks/page_assets.py names for the page's markers
    requested (no Vega without a chart, no KaTeX without math), no code that scrolls."""
    table = load_hook("page_assets")
    listed = {f for _, row in table.ASSETS for f in row.scripts + row.styles}
    stray, wide = [], []
    for html in every_page(built_site):
        page.requested.clear()
        page.goto(url_of(served, built_site, html), wait_until="load")
        got = {urlsplit(u).path.lstrip("/") for u in page.requested} & listed
        needs = table.needs(html.read_text(encoding="utf-8"))
        want = {*needs.styles, *needs.scripts}
        if got != want:
            stray.append(f"{html.relative_to(built_site)}: {sorted(got ^ want)}")
        for i, scroll, client, first in page.evaluate(OVERFLOWING_CODE):
            wide.append(
                f"{html.parent.relative_to(built_site)} block {i}: {scroll} > {client}"
                f" px, {first[:60]!r}"
            )
    assert not page.foreign, f"fetched from other hosts: {sorted(set(page.foreign))}"
    assert not page.errors, page.errors
    assert not stray, "loads more or less than it needs:\n" + "\n".join(stray)
    assert not wide, f"{len(wide)} code blocks scroll sideways:\n" + "\n".join(wide)


def test_charts_draw_show_values_on_hover_and_toggle_from_the_legend(
    page, served, built_site
) -> None:
    for html in chart_pages(built_site):
        page.goto(url_of(served, built_site, html))
        for i in range(wait_for_charts(page)):
            chart = page.locator("figure.cp-chart").nth(i)
            where = f"{html.parent.relative_to(built_site)} chart {i}"
            chart.scroll_into_view_if_needed()
            marks = chart.locator(".mark-symbol path, .mark-rect path")
            mark = marks.nth(marks.count() // 2)  # not one half outside the plot
            box = mark.bounding_box()
            page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
            tip = page.locator("#vg-tooltip-element.visible")
            tip.wait_for(timeout=5000)
            assert tip.inner_text().strip(), f"{where}: empty tooltip"
            lines = chart.locator(".mark-line path")
            if not lines.count():
                continue  # a heatmap: no series to toggle
            opacity = "els => els.map(e => getComputedStyle(e).opacity)"
            before = lines.evaluate_all(opacity)
            chart.locator(".role-legend-symbol path").first.click(force=True)
            page.wait_for_timeout(300)
            after = lines.evaluate_all(opacity)
            assert set(before) == {"1"}, f"{where}: {before}"
            assert "1" in after and min(map(float, after)) < 0.5, f"{where}: {after}"
    assert not page.foreign and not page.errors, (page.foreign, page.errors)


# Every text of every chart, at the size it is drawn (its font size times the svg's
# scale), and whether it lies inside its chart.
CHART_TEXT = """() => [...document.querySelectorAll('figure.cp-chart svg')]
.flatMap((svg, i) => {
  const box = svg.getBoundingClientRect();
  const scale = box.width / (svg.viewBox.baseVal.width || box.width);
  return [...svg.querySelectorAll('text')].filter(t => t.textContent.trim()).map(t => {
    const r = t.getBoundingClientRect();
    return [i, t.textContent, parseFloat(getComputedStyle(t).fontSize) * scale,
            r.left >= box.left - 1 && r.right <= box.right + 1];
  });
})"""


def test_chart_text_is_at_least_10_px_and_unclipped_on_a_phone(
    open_page, served, built_site
) -> None:
    page = open_page(width=390)
    small, clipped = [], []
    for html in chart_pages(built_site):
        page.goto(url_of(served, built_site, html))
        wait_for_charts(page)
        where = html.parent.relative_to(built_site)
        for i, text, size, inside in page.evaluate(CHART_TEXT):
            if size < 10:
                small.append(f"{where} chart {i}: {text!r} at {size:.1f} px")
            if not inside:
                clipped.append(f"{where} chart {i}: {text!r}")
        assert page.evaluate("document.documentElement.scrollWidth") <= 390, where
    assert not small, "\n".join(small[:20])
    assert not clipped, "text outside its chart:\n" + "\n".join(clipped[:20])


# Per chart: each axis's title and its labels as drawn (those not hidden for overlap),
# the legends' labels as one more "axis", and the lines of the chart's title.
AXES_AND_TITLE = """() => [...document.querySelectorAll('figure.cp-chart svg')]
.map(svg => {
  const shown = t => t.textContent && t.getAttribute('opacity') !== '0';
  const axes = [...svg.querySelectorAll('.role-axis')].map(axis => [
    [...axis.querySelectorAll('.role-axis-title text')].map(t => t.textContent).join(),
    [...axis.querySelectorAll('.role-axis-label text')].filter(shown)
      .map(t => t.textContent)]);
  axes.push(['legend', [...svg.querySelectorAll('.role-legend-label text')]
    .map(t => t.textContent)]);
  const title = svg.querySelector('.role-title-text text');
  const spans = title ? [...title.querySelectorAll('tspan')] : [];
  const lines = spans.length ? spans.map(t => t.textContent) : [title?.textContent];
  return [axes, lines];
})"""
BYTES = re.compile(r"^\d+(\.\d+)? (B|KiB|MiB|GiB|TiB)$")
TIMES = re.compile(r"^(0|\d+(\.\d+)? (ns|µs|ms|s))$")


def test_axes_write_bytes_and_times_in_units_and_titles_keep_to_one_line(
    page, served, built_site
) -> None:
    """On the page's width no chart's title wraps and no axis label is in "1e+1"
    notation; the latency note has an axis of bytes (64 KiB) and one of times (1 ms)."""
    wrapped, exponents, kinds = [], [], {}
    for html in chart_pages(built_site):
        url = url_of(served, built_site, html)
        page.goto(url)
        wait_for_charts(page)
        for i, (axes, lines) in enumerate(page.evaluate(AXES_AND_TITLE)):
            where = f"{html.parent.relative_to(built_site)} chart {i}"
            if len(lines) > 1:
                wrapped.append(f"{where}: {lines}")
            for title, labels in axes:
                exponents += [f"{where} {title!r}: {t!r}" for t in labels if "e+" in t]
                for kind, pattern in (("bytes", BYTES), ("times", TIMES)):
                    if labels and all(pattern.match(t) for t in labels):
                        kinds.setdefault(url, set()).add(kind)
    assert not wrapped, "titles that wrap on the page:\n" + "\n".join(wrapped)
    assert not exponents, "labels in e-notation:\n" + "\n".join(exponents)
    latency = note_url(served, built_site, "Ping-pong between two ranks")
    assert kinds.get(latency) == {"bytes", "times"}, kinds
    assert not page.foreign and not page.errors, (page.foreign, page.errors)


# The page colour behind the charts, every series colour drawn, every guide text colour.
CHART_COLOURS = """() => {
  let el = document.querySelector('figure.cp-chart'), bg = 'rgba(0, 0, 0, 0)';
  while (el && /rgba\\(.*, 0\\)|transparent/.test(bg)) {
    bg = getComputedStyle(el).backgroundColor; el = el.parentElement;
  }
  const style = (sel, prop) => [...document.querySelectorAll(sel)]
    .map(e => getComputedStyle(e)[prop]);
  return [bg, document.body.dataset.mdColorScheme,
    [...style('figure.cp-chart .mark-line path', 'stroke'),
     ...style('figure.cp-chart .mark-symbol path', 'fill')],
    style('figure.cp-chart .role-axis text, figure.cp-chart .role-legend text,'
          + ' figure.cp-chart .role-title text', 'fill')];
}"""


@pytest.mark.parametrize("scheme, material", [("light", "default"), ("dark", "slate")])
def test_series_contrast_3_to_1_in_both_schemes(
    open_page, served, built_site, scheme, material
) -> None:
    page = open_page(scheme=scheme)
    low = []
    for html in chart_pages(built_site):
        page.goto(url_of(served, built_site, html))
        wait_for_charts(page)
        bg, seen, series, texts = page.evaluate(CHART_COLOURS)
        where = html.parent.relative_to(built_site)
        assert seen == material, f"{where}: Material's scheme is {seen}"
        low += [
            f"{where}: series {c} on {bg}" for c in set(series) if contrast(c, bg) < 3
        ]
        low += [
            f"{where}: text {c} on {bg}" for c in set(texts) if contrast(c, bg) < 4.5
        ]
    assert not low, "\n".join(low)
    assert not page.foreign and not page.errors, (page.foreign, page.errors)


# The winner band's colours, in order along the size axis, of the α-β explorer.
BAND = """() => [...document.querySelectorAll('figure.cp-chart')]
  .filter(f => f.querySelector('.vega-bindings input[type=range]'))
  .map(f => [...f.querySelectorAll('.mark-rect path')]
    .map(p => p.getAttribute('fill')))"""


def test_a_bound_slider_changes_the_drawn_winner(page, served, built_site) -> None:
    page.goto(note_url(served, built_site, "cost_model_explorer"))
    wait_for_charts(page)
    (before,) = page.evaluate(BAND)
    assert len(set(before)) >= 2, before  # at the fit, more than one algorithm wins
    alpha = page.locator(".vega-bindings input[type=range]").first
    alpha.evaluate(
        "el => { el.value = el.min;"
        " el.dispatchEvent(new Event('input', {bubbles: true})); }"
    )
    page.wait_for_function(f"({BAND})()[0].join() !== {before!r}.join()", timeout=5000)
    (after,) = page.evaluate(BAND)
    assert after != before
    assert not page.foreign and not page.errors, (page.foreign, page.errors)
