"""Finding the way in Chromium, every other host refused: tag links lead to the tags
page, a note has one "next" and it is the series', the notebook's math typesets,
search previews show no TeX, the home page stays under 1 MB, and a table that scrolls
can be scrolled from the keyboard."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from browsing import url_of

pytestmark = pytest.mark.browser

RAW_TEX = re.compile(r"\\[(\[]|\\(?:frac|alpha|cdot|infty|log)\b|\$[^$\s]+\$")


def a_note_with_tags_and_a_next(built_site: Path) -> Path:
    for html in sorted((built_site / "blog").glob("20*/*/*/*/index.html")):
        text = html.read_text(encoding="utf-8")
        if 'class="md-tag"' in text and "md-footer__link--next" in text:
            return html
    pytest.fail("no note has tags and a next note")


def test_tag_links_and_a_single_next(open_page, served, built_site) -> None:
    page = open_page()
    html = a_note_with_tags_and_a_next(built_site)
    page.goto(url_of(served, built_site, html))
    nexts = page.locator("a", has_text=re.compile(r"^\s*Next\b"))
    assert nexts.count() == 1, nexts.all_inner_texts()
    footer_next = page.locator("a.md-footer__link--next")
    assert footer_next.count() == 1
    tag = page.locator("a.md-tag").first
    name = tag.inner_text().strip()
    title = page.locator("h1").first.inner_text().replace("¶", "").strip()
    tag.click()
    page.wait_for_url(re.compile(r"/tags/#"))
    section = page.locator(f'[id="{page.url.split("#", 1)[1]}"]')
    assert name in section.inner_text()
    assert page.get_by_role("link", name=title).count() >= 1
    assert not page.foreign and not page.errors, (page.foreign, page.errors)


def test_notebook_math_renders(open_page, served, built_site) -> None:
    page = open_page()
    page.goto(served + "notebooks/tiling-step-by-step/")
    page.wait_for_selector(".jupyter-wrapper .katex", timeout=15000)
    texts = page.locator(".jupyter-wrapper .jp-RenderedMarkdown").all_inner_texts()
    assert texts and not any(RAW_TEX.search(t) for t in texts), texts
    assert page.locator(".jupyter-wrapper .katex").count() >= 8
    assert not page.foreign and not page.errors, (page.foreign, page.errors)


def test_search_previews_show_no_tex(open_page, served) -> None:
    page = open_page()
    previews = [f"{t} {p}" for t, p in search(page, served, "all-reduce ring steps")]
    assert previews
    raw = [p[:120] for p in previews if RAW_TEX.search(p)]
    assert not raw, raw


def test_home_page_under_1_mb(open_page, served) -> None:
    page = open_page()
    page.goto(served, wait_until="networkidle")
    total = page.evaluate(
        "() => performance.getEntriesByType('navigation')"
        ".concat(performance.getEntriesByType('resource'))"
        ".reduce((s, e) => s + (e.encodedBodySize || e.transferSize || 0), 0)"
    )
    assert 0 < total < 1_000_000, f"home page loads {total} bytes"
    assert not page.foreign, page.foreign


def test_scrolling_tables_take_keyboard_focus(open_page, served, built_site) -> None:
    page = open_page(width=390)
    for html in sorted((built_site / "blog").glob("20*/*/*/*/index.html")):
        if "<table" not in html.read_text(encoding="utf-8"):
            continue
        page.goto(url_of(served, built_site, html))
        wide = page.locator(".md-typeset__scrollwrap").filter(has=page.locator("table"))
        page.wait_for_selector(".md-typeset__scrollwrap")
        index = page.evaluate(
            "() => [...document.querySelectorAll('.md-typeset__scrollwrap')]"
            ".findIndex(w => w.scrollWidth > w.clientWidth + 4)"
        )
        if index < 0:
            continue
        scroller = wide.nth(index)
        assert scroller.get_attribute("tabindex") == "0"
        scroller.focus()
        assert page.evaluate("() => document.activeElement.className").startswith(
            "md-typeset__scrollwrap"
        )
        for _ in range(5):
            page.keyboard.press("ArrowRight")
        page.wait_for_timeout(300)
        assert scroller.evaluate("e => e.scrollLeft") > 0
        return
    pytest.fail("no table scrolls sideways on a phone")


def test_home_first_screen_on_a_phone_says_what_and_where_to_start(
    open_page, served, built_site
) -> None:
    """At 390 × 844 (a phone), before any scrolling: one line saying what the site
    is, and the link to the first note of the first series."""
    page = open_page(width=390)
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(served)
    start = page.locator("a.cp-start")
    assert start.count() == 1
    box = start.bounding_box()
    assert box and 0 <= box["y"] and box["y"] + box["height"] <= 844, box
    lead = page.locator("article h1 + p").first
    what = lead.bounding_box()
    assert what and what["y"] + what["height"] <= box["y"], (what, box)
    assert "notes" in lead.inner_text().lower() and lead.inner_text().count(".") == 1
    start.click()
    page.wait_for_load_state()
    assert "Part 1 of" in page.locator("p.cp-part").first.inner_text()
    assert not page.foreign and not page.errors, (page.foreign, page.errors)


# Each search result article's (title, preview text), read in one go: the list is
# redrawn as the search answers each key typed, so an article found by index a
# moment ago may be gone.
RESULTS = """() => [...document.querySelectorAll('.md-search-result__article')]
  .map(a => { const t = (a.querySelector('h1, h2')?.innerText || '').trim();
              return [t, a.innerText.replace(t, '').trim()]; })"""


def search(page, served: str, words: str) -> list[tuple[str, str]]:
    """(title, preview text) of each search result article for ``words``, once the
    list has stopped changing (the same in two reads a second apart)."""
    page.goto(served)
    page.click("input.md-search__input")
    page.keyboard.type(words)
    page.wait_for_selector(".md-search-result__item", timeout=20000)
    found, before = page.evaluate(RESULTS), None
    for _ in range(20):
        if found == before:
            break
        page.wait_for_timeout(1000)
        before, found = found, page.evaluate(RESULTS)
    return [tuple(r) for r in found]


def test_search_previews_are_never_a_code_block_and_tags_has_one(
    open_page, served
) -> None:
    page = open_page()
    tags = search(page, served, "tags")
    assert ("Tags", "") not in tags
    assert any(t == "Tags" and "tag" in text for t, text in tags), tags
    for words in ("make serve snippets", "python snippets run"):
        results = search(page, served, words)
        assert results, words
        blocks = page.locator(".md-search-result__article pre")
        assert blocks.count() == 0, blocks.all_inner_texts()[:3]
    assert not page.foreign and not page.errors, (page.foreign, page.errors)
