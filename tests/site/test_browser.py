"""The built site in a real browser with every other host unreachable: math typesets,
mermaid draws, search answers, and no page even tries to fetch from elsewhere."""

from __future__ import annotations

import functools
import http.server
import os
import shutil
import threading
from pathlib import Path
from urllib.parse import urlsplit

import pytest

pytestmark = pytest.mark.browser


def chromium() -> str:
    for candidate in (os.environ.get("CHROMIUM"), "chromium", "chromium-browser", "google-chrome"):
        if candidate and shutil.which(candidate):
            return shutil.which(candidate)
    pytest.skip("no Chromium here (CI installs Debian's chromium package)")


@pytest.fixture(scope="module")
def served(built_site: Path):
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(built_site))
    handler.log_message = lambda *a, **k: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=chromium(), args=[
            "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
            "--disable-component-update", "--disable-sync"])
        yield b
        b.close()


@pytest.fixture()
def page(browser, served):
    """A page whose every request to another host is refused, and recorded."""
    context = browser.new_context()
    foreign: list[str] = []

    def route(r):
        host = urlsplit(r.request.url).hostname
        if r.request.url.startswith(("data:", "blob:")) or host == "127.0.0.1":
            return r.continue_()
        foreign.append(r.request.url)
        return r.abort()
    context.route("**/*", route)
    p = context.new_page()
    errors: list[str] = []
    p.on("pageerror", lambda e: errors.append(str(e)))
    p.foreign, p.errors = foreign, errors
    yield p
    context.close()


def note_url(served: str, built_site: Path, containing: str) -> str:
    for html in sorted((built_site / "blog").glob("20*/**/index.html")):
        if containing in html.read_text(encoding="utf-8"):
            return served + html.parent.relative_to(built_site).as_posix() + "/"
    pytest.fail(f"no note contains {containing!r}")


def test_math_and_diagrams_render_offline(page, served, built_site, tmp_path_factory) -> None:
    page.goto(note_url(served, built_site, 'class="arithmatex"'))
    page.wait_for_selector(".katex", timeout=15000)
    page.goto(note_url(served, built_site, 'class="mermaid"'))
    # Material swaps each <pre class="mermaid"> for a <div class="mermaid"> holding the
    # drawing in a closed shadow root: done when no <pre> is left and the divs have size.
    page.wait_for_function("document.querySelectorAll('pre.mermaid').length === 0"
                           " && [...document.querySelectorAll('div.mermaid')].every(d => d.offsetHeight > 20)",
                           timeout=30000)
    shot = tmp_path_factory.getbasetemp() / "mermaid-note.png"
    page.screenshot(path=str(shot), full_page=False)
    assert not page.foreign, f"tried to fetch from other hosts: {page.foreign}"
    assert not page.errors, page.errors


def test_search_works_offline(page, served) -> None:
    page.goto(served)
    page.click("input.md-search__input")
    page.keyboard.type("rank")
    page.wait_for_selector(".md-search-result__item", timeout=20000)
    assert page.locator(".md-search-result__item").count() > 0
    assert not page.foreign, f"tried to fetch from other hosts: {page.foreign}"


def test_every_page_loads_without_a_foreign_request(page, served, built_site) -> None:
    for html in sorted(built_site.rglob("index.html")):
        url = served + html.parent.relative_to(built_site).as_posix() + "/"
        page.goto(url.replace("/./", "/"), wait_until="load")
    assert not page.foreign, f"tried to fetch from other hosts: {sorted(set(page.foreign))[:10]}"
    assert not page.errors, page.errors
