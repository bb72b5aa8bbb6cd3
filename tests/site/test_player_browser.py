"""The trace animation player in the built site, in Chromium, with every other host
refused: stepped to its end by keyboard, every player draws the labels of the last
frame its run recorded, and the values of the buffers the run ended with; with
reduced motion nothing plays by itself, without it the player plays; a 390 px phone
scrolls nothing sideways and no player text is under 10 px; no console error; and only
pages with a player load its code."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from browsing import contrast, url_of

from snippets.core.player import label

pytestmark = pytest.mark.browser

TRACE = re.compile(r'<script type="application/json" class="cp-player__trace">(.*?)</')
LABELS = "f => [...f.querySelectorAll('.cp-player__cell')].map(c => c.dataset.label)"
DRAWN = "f => [...f.querySelectorAll('.cp-player__cell text')].map(t => t.textContent)"
VALUES = "f => [...f.querySelectorAll('.cp-player__cell')].map(c => c.dataset.value)"
TEXT_PX = """f => [...f.querySelectorAll('svg text')].map(t => {
  const svg = t.ownerSVGElement, scale = svg.getBoundingClientRect().width
    / svg.viewBox.baseVal.width;
  return parseFloat(getComputedStyle(t).fontSize) * scale; })"""


def player_pages(built_site: Path) -> list[tuple[Path, list[dict]]]:
    found = []
    for html in sorted((built_site / "blog").glob("20*/**/index.html")):
        anims = TRACE.findall(html.read_text(encoding="utf-8"))
        if anims:
            found.append((html, [json.loads(a.replace("<\\/", "</")) for a in anims]))
    assert found, "no note embeds a player"
    return found


def test_players_step_to_the_recorded_last_frame_by_keyboard_on_a_phone(
    browser,
    served,
    built_site,
) -> None:
    context = browser.new_context(
        viewport={"width": 390, "height": 800}, reduced_motion="reduce"
    )
    page = context.new_page()
    errors: list[str] = []
    foreign: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)

    def route(r) -> None:
        local = re.match(r"(data:|blob:|http://127\.0\.0\.1[:/])", r.request.url)
        if not local:
            foreign.append(r.request.url)
        r.continue_() if local else r.abort()

    context.route("**/*", route)
    checked = 0
    for html, anims in player_pages(built_site):
        page.goto(url_of(served, built_site, html))
        figs = page.locator("figure.cp-player")
        figs.first.locator(".cp-player__cell").first.wait_for(timeout=15000)
        assert figs.count() == len(anims)
        where = html.parent.relative_to(built_site)
        if not checked:  # reduced motion: no autoplay, even once in view
            figs.first.scroll_into_view_if_needed()
            page.wait_for_timeout(1500)
            assert figs.first.get_attribute("data-frame") == "0", where
        for i, anim in enumerate(anims):
            fig, last = figs.nth(i), len(anim["frames"]) - 1
            fig.focus()
            if i == 0:  # one step at a time, by arrow key
                for _ in range(last):
                    page.keyboard.press("ArrowRight")
            else:
                page.keyboard.press("End")
            assert fig.get_attribute("data-frame") == str(last), (where, i)
            cells = anim["frames"][-1]["cells"]
            want = [label(c) for row in cells for c in row]
            assert want == [x for row in anim["final_labels"] for x in row]
            assert fig.evaluate(LABELS) == want, (where, i)
            drawn = fig.evaluate(DRAWN)  # a recorded value may follow the ranks
            words = anim["frames"][-1].get("text")  # or the frame names its cells
            if words:
                want_drawn = [w for row in words for w in row]
                assert drawn == want_drawn, (where, i)
            else:
                assert all(d.split(" ")[0] == w for d, w in zip(drawn, want)), (
                    where,
                    i,
                )
            assert len(drawn) == len(want), (where, i)
            # the values drawn equal the run's final buffers, where it defines them
            values = fig.evaluate(VALUES)
            final = [x for row in anim["final"] for x in row]
            for got, w in zip(values, final):
                assert w is None or float(got) == w, (where, i, got, w)
            page.keyboard.press("Home")  # and back
            assert fig.get_attribute("data-frame") == "0", (where, i)
            assert min(fig.evaluate(TEXT_PX)) >= 10, (where, i)
            checked += 1
        assert page.evaluate("document.documentElement.scrollWidth") <= 390, where
    context.close()
    assert checked >= 16, f"only {checked} players"
    assert not errors, errors
    assert not foreign, foreign


def test_a_player_plays_by_itself_without_reduced_motion(
    open_page,
    served,
    built_site,
) -> None:
    # a page whose first player has steps left to pause in after the first one
    html = next(h for h, a in player_pages(built_site) if len(a[0]["frames"]) > 3)
    page = open_page(scheme="dark")
    page.goto(url_of(served, built_site, html))
    fig = page.locator("figure.cp-player").first
    fig.scroll_into_view_if_needed()
    page.wait_for_function(
        "f => +f.dataset.frame > 0", arg=fig.element_handle(), timeout=5000
    )
    fig.locator('button[aria-label="Pause"]').click()
    assert fig.get_attribute("data-playing") == "false"
    assert not page.errors and not page.foreign, (page.errors, page.foreign)


# The page colour behind the first player, and every stripe colour it draws.
STRIPE_COLOURS = """() => {
  const f = document.querySelector('figure.cp-player');
  let el = f, bg = 'rgba(0, 0, 0, 0)';
  while (el && /rgba\\(.*, 0\\)|transparent/.test(bg)) {
    bg = getComputedStyle(el).backgroundColor; el = el.parentElement;
  }
  return [bg, [...f.querySelectorAll('.cp-player__stripe')]
    .map(s => getComputedStyle(s).fill)];
}"""


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_stripes_contrast_3_to_1_in_both_schemes(
    open_page,
    served,
    built_site,
    scheme,
) -> None:
    page = open_page(scheme=scheme)
    html = next(h for h, _ in player_pages(built_site) if "ring-allreduce" in str(h))
    page.goto(url_of(served, built_site, html))
    page.locator("figure.cp-player").first.focus()
    page.keyboard.press("End")  # the last frame: every rank's colour is drawn
    bg, stripes = page.evaluate(STRIPE_COLOURS)
    assert len(set(stripes)) >= 2, stripes
    low = [f"stripe {c} on {bg}" for c in set(stripes) if contrast(c, bg) < 3]
    assert not low, "\n".join(low)
    assert not page.foreign and not page.errors, (page.foreign, page.errors)
