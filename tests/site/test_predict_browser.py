"""Prediction questions in Chromium, by keyboard alone: the answer stays folded until a
guess is committed, Enter commits it and opens the answer with a verdict, the answer
shown is the one the run computed; only pages with a question load its script."""

from __future__ import annotations

import json

import pytest
from browsing import url_of

pytestmark = pytest.mark.browser


def test_a_guess_is_committed_by_keyboard_then_the_answer_opens(
    open_page,
    served,
    built_site,
    results_dir,
) -> None:
    answers = json.loads((results_dir / "predictions.json").read_text())
    ring = answers["result"]["answers"]["ring_bytes"]
    html = next(built_site.glob("blog/20*/**/ring-allreduce/index.html"))
    page = open_page()
    page.goto(url_of(served, built_site, html))
    form = page.locator("form.cp-predict").first
    details = form.locator("details")
    form.locator("summary").focus()
    page.keyboard.press("Enter")  # before any guess: it asks for one instead
    assert details.evaluate("d => d.open") is False
    assert "Commit a guess first" in form.locator(".cp-predict-prompt").inner_text()
    assert page.evaluate("document.activeElement.name") == "guess"
    page.keyboard.type("1.5 MiB")
    page.keyboard.press("Enter")
    assert details.evaluate("d => d.open") is True
    said = form.locator(".cp-predict-verdict").inner_text()
    assert said.startswith("You said 1.5 MiB.") and "right" in said
    assert f"{ring:,.0f} bytes" in details.inner_text()
    assert not page.errors and not page.foreign


def test_only_pages_with_a_question_load_its_script(built_site) -> None:
    for html in built_site.rglob("index.html"):
        text = html.read_text(encoding="utf-8")
        assert ("predict/predict.js" in text) == ('<form class="cp-predict"' in text), (
            html
        )
