"""Every page of the built site, in both colour schemes, checked by axe-core (the npm
package the Makefile installs, injected from node_modules) against the WCAG 2.0 and
2.1 A and AA rules, and a few best practices the site once broke: no violation at
all, once the charts, players, model viewers and the calculator have drawn. A failure
names the page, the scheme, the rule and a node, with axe's reason."""

from __future__ import annotations

from collections import Counter

import pytest
from browsing import chart_pages, every_page, url_of, wait_for_charts
from conftest import REPO

pytestmark = [pytest.mark.browser, pytest.mark.long]

AXE = REPO / "node_modules" / "axe-core" / "axe.min.js"
TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]
# Best practices the site once broke, held too: a named search dialog, landmarks told
# apart, roles their elements allow, no empty table header, no skipped heading level.
ALSO = [
    "aria-dialog-name",
    "landmark-unique",
    "aria-allowed-role",
    "empty-table-header",
    "heading-order",
]
SCHEMES = {"light": "default", "dark": "slate"}  # the browser's, Material's

# Everything a page draws with script, drawn: each chart's marks, each player's cells,
# each model viewer's nodes, the calculator's table.
DRAWN = """() => [
  ['figure.cp-chart', '.cp-chart__view svg .role-mark'],
  ['figure.cp-player', '.cp-player__cell'],
  ['figure.cp-viewer', '.cp-node'],
  ['figure.cp-sizing', 'table'],
].every(([figure, drawn]) => [...document.querySelectorAll(figure)]
  .every(f => f.querySelector(drawn)))"""

# axe starts on the page and leaves its answer in window.cpAxe: the other scheme's
# page loads and runs meanwhile (one renderer each, one core each). The answer is
# [rule, impact, help, [[target, html, why], ...]] for each rule violated.
START = """([tags, also]) => {
  window.cpAxe = axe.run(document, {
    runOnly: {type: 'tag', values: tags},
    rules: Object.fromEntries(also.map(rule => [rule, {enabled: true}])),
    resultTypes: ['violations'],
  }).then(result => result.violations.map(v => [v.id, v.impact, v.help,
    v.nodes.map(n => [n.target.join(' '), n.html.slice(0, 160),
      (n.failureSummary || '').split('\\n').slice(1).join(' ').trim()])]));
}"""


# About 55 pages, each in both schemes: axe's contrast check reads every span of every
# code block, some seconds a page on two busy cores. The pages are read in SLICES
# tests, every SLICES-th page each, so a failure names fewer pages, and each slice goes
# to the next free process (conftest's SPREAD), not all four to one.
SLICES = 4


@pytest.mark.timeout(600)
@pytest.mark.parametrize("k", range(SLICES), ids=lambda k: f"pages {k} mod {SLICES}")
def test_no_wcag_a_or_aa_violation_on_any_page_in_either_scheme(
    browser,
    served,
    built_site,
    k,
) -> None:
    assert AXE.is_file(), f"{AXE} is missing: `npm ci` installs axe-core"
    contexts = [
        browser.new_context(
            viewport={"width": 1280, "height": 900},
            color_scheme=scheme,
            reduced_motion="reduce",  # no player steps on by itself while axe reads
        )
        for scheme in SCHEMES
    ]
    pages = dict(zip(SCHEMES, (c.new_page() for c in contexts)))
    found, counts, htmls = [], Counter(), every_page(built_site)[k::SLICES]
    try:
        for html in htmls:
            where = html.parent.relative_to(built_site).as_posix()
            for scheme, page in pages.items():
                page.goto(url_of(served, built_site, html), wait_until="load")
                page.wait_for_function(DRAWN, timeout=20000)
                page.evaluate("document.fonts.ready.then(() => true)")
                seen = page.evaluate("document.body.dataset.mdColorScheme")
                assert seen == SCHEMES[scheme], f"{where} [{scheme}]: {seen}"
                page.add_script_tag(path=str(AXE))
                page.evaluate(START, [TAGS, ALSO])
            for scheme, page in pages.items():
                for rule, impact, text, nodes in page.evaluate("window.cpAxe"):
                    counts[scheme, rule] += len(nodes)
                    target, snippet, why = nodes[0]
                    found.append(
                        f"{where or '.'} [{scheme}] {rule} ({impact}, {len(nodes)}"
                        f" nodes): {text}\n    {target}\n    {snippet}\n    {why}"
                    )
    finally:
        for context in contexts:
            context.close()
    assert len(htmls) > 1, htmls  # every slice has pages to read
    summary = ", ".join(f"{s} {rule} {n}" for (s, rule), n in sorted(counts.items()))
    assert not found, f"{len(found)} violations ({summary}):\n" + "\n".join(found)


# For each chart: its legend's entries as Vega drew them, its series buttons' names
# and states, and the opacities of its data marks.
LEGEND = """f => [
  f.querySelectorAll('.role-legend-symbol path').length,
  [...f.querySelectorAll('.cp-chart__keys button')].map(b => [b.textContent,
                                                          b.ariaPressed]),
  [...f.querySelectorAll('.role-mark > path, .role-mark > line, .role-mark > rect')]
    .filter(e => !e.closest('.role-legend'))
    .map(e => +getComputedStyle(e).opacity),
]"""


def test_a_chart_legend_works_from_the_keyboard(
    browser,
    served,
    built_site,
) -> None:
    """Where a click on a chart's legend fades the other series, a button per legend
    entry does from the keyboard what the click does: Enter on the first button fades
    the marks as a click on the legend's first entry does, and presses the button;
    Space on it again brings every mark back as it was; the click presses it too."""
    page = browser.new_page(reduced_motion="reduce")
    checked = []
    try:
        for html in chart_pages(built_site):
            page.goto(url_of(served, built_site, html))
            for i in range(wait_for_charts(page)):
                chart = page.locator("figure.cp-chart").nth(i)
                where = f"{html.parent.relative_to(built_site)} chart {i}"
                entries, keys, drawn = chart.evaluate(LEGEND)
                if not keys:
                    continue
                assert len(keys) == entries, (where, entries, keys)
                assert all(p == "false" for _, p in keys), (where, keys)
                chart.locator(".cp-chart__keys button").first.focus()
                page.keyboard.press("Enter")
                page.wait_for_timeout(200)
                _, by_key, faded = chart.evaluate(LEGEND)
                page.keyboard.press("Space")
                page.wait_for_timeout(200)
                _, released, back = chart.evaluate(LEGEND)
                chart.locator(".role-legend-symbol path").first.click(force=True)
                page.wait_for_timeout(200)
                _, by_click, clicked = chart.evaluate(LEGEND)
                pressed = ["true"] + ["false"] * (len(keys) - 1)
                assert [p for _, p in by_key] == pressed, (where, by_key)
                assert [p for _, p in by_click] == pressed, (where, by_click)
                assert "true" not in [p for _, p in released], (where, released)
                assert faded == clicked and min(faded) < 0.5, (where, faded, clicked)
                assert back == drawn, (where, back, drawn)
                checked.append(where)
    finally:
        page.close()
    assert checked, "no chart has a legend that fades series"
