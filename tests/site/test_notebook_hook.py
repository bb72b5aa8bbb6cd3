"""hooks/notebook.py: the notebook page's provenance, from the run that made it."""

from __future__ import annotations

import datetime
import re

from conftest import REPO, load_hook

notebook = load_hook("notebook")


def test_a_notebook_page_without_its_own_record_says_so() -> None:
    wrapper = '<main><div class="jupyter-wrapper"><p>out</p></div></main>'
    said = notebook.notebook_provenance(wrapper)
    assert said.count("cp-provenance") == 1 and "not recorded" in said
    stamped = wrapper.replace("<p>out", '<p class="cp-provenance">Last run: x</p><p>')
    assert notebook.notebook_provenance(stamped) == stamped


def test_the_notebook_records_the_commit_and_time_it_ran() -> None:
    """Executed as mkdocs-jupyter executes it: the line it prints names this checkout's
    commit and a time between the start and the end of the run (the clock is the
    oracle), so a page made from the cache shows that run's, not the build's."""
    from mkdocs_jupyter import convert

    from snippets.core.results import commit

    def now() -> datetime.datetime:
        return datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)

    start = now()
    html = convert.nb2html(
        str(REPO / "docs" / "notebooks" / "tiling-step-by-step.ipynb"),
        execute=True,
        allow_errors=False,
    )
    end = now()
    lines = re.findall(r'<p class="cp-provenance">(.*?)</p>', html)
    assert len(lines) == 1, lines
    when = re.search(r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) UTC", lines[0])
    ran = datetime.datetime.fromisoformat(when.group(1) + "+00:00")
    assert start <= ran <= end, (start, ran, end)
    assert f"commit {commit()} ·" in lines[0]
    wrapped = f'<div class="jupyter-wrapper">{html}</div>'
    assert notebook.notebook_provenance(wrapped) == wrapped


STYLED = (
    '<style type="text/css">\n@charset "UTF-8";'
    ".jupyter-wrapper{--used:var(--deep);--deep:#123456;--unused:red}"
    ".jupyter-wrapper .jp-Used,.jupyter-wrapper .jp-Absent{color:var(--used)}"
    ".jupyter-wrapper .jp-Absent{color:blue}"
    ".jp-Used:not(.jp-Absent) pre{word-break:break-all;word-wrap:break-word}"
    "@media (max-width:760px){.jp-Absent{margin:0}.jp-Used{margin:1px}}"
    "@font-face{font-family:x;src:url(data:font/woff2;base64,AAAA)}"
    "</style>"
    '<div class="jupyter-wrapper"><div class="jp-Used"><pre>1.2345e-08</pre></div>'
    "</div>"
    "<style>\n['pre { line-height: 125%; }\\n']\n</style>"
)


def test_the_notebook_keeps_only_the_styles_its_elements_use() -> None:
    out = notebook.slim_styles(STYLED)
    styles = re.findall(r"<style[^>]*>(.*?)</style>", out, re.S)
    assert styles == [
        ".jupyter-wrapper{--used:var(--deep);--deep:#123456}"
        ".jupyter-wrapper .jp-Used{color:var(--used)}"
        ".jp-Used:not(.jp-Absent) pre{word-break:normal;word-wrap:break-word}"
        "@media (max-width:760px){.jp-Used{margin:1px}}"
    ]  # the Python list's repr is gone, and nothing else holds a "["
    assert '<div class="jp-Used"><pre>1.2345e-08</pre></div>' in out


def test_the_built_notebook_page_is_small_and_its_css_parses(built_site) -> None:
    import tinycss2

    page = built_site / "notebooks" / "tiling-step-by-step" / "index.html"
    html = page.read_text(encoding="utf-8")
    assert len(html.encode()) < 200_000  # it was 668 kB, 574 kB of it JupyterLab's CSS
    for css in re.findall(r"<style[^>]*>(.*?)</style>", html, re.S):
        rules = tinycss2.parse_stylesheet(css, skip_whitespace=True)
        assert not [r for r in rules if r.type == "error"], css[:200]
        assert "break-all" not in css
    assert "jp-OutputArea-output pre{" in html  # the output's own rule is kept
