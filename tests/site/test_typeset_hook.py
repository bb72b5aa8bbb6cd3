"""hooks/typeset.py: a page's math leaves the build typeset by KaTeX, its TeX kept only
in the MathML annotation KaTeX writes for screen readers, by one Node process."""

from __future__ import annotations

import html
import re

import pytest
from conftest import REPO, load_hook
from mkdocs.exceptions import PluginError

typeset = load_hook("typeset")

# as pymdownx.arithmatex (generic) writes them: TeX escaped for HTML
PAGE = (
    "<p>Each step sends "
    '<span class="arithmatex">\\(2\\frac{p-1}{p}\\,n\\)</span> bytes when '
    '<span class="arithmatex">\\(s &lt; t\\)</span>.</p>\n'
    '<div class="arithmatex">\\[\n'
    "t = \\alpha + n\\beta\n"
    "\\]</div>\n"
    "<p>It costs $5 and $6, and <code>\\(kept\\)</code> is code.</p>"
)
NOTEBOOK = (
    '<div class="jupyter-wrapper"><div class="jp-RenderedHTMLCommon jp-RenderedMarkdown'
    ' jp-MarkdownOutput" data-mime-type="text/markdown">\n<p>watch $m$ grow, then'
    " <code>$not math$</code> and</p>\n<p>$$L = m + \\log d$$</p>\n</div>"
    '<div class="jp-OutputArea-output"><pre>$ python -m x: $5</pre></div></div>'
)


@pytest.fixture(scope="module")
def katex():
    k = typeset.Katex(REPO / "node_modules")
    yield k
    k.close()


def formulas(page: str) -> list[tuple[str, bool]]:
    """Each typeset formula's TeX, read back from KaTeX's own annotation, and whether
    it is set as display math."""
    display = '<span class="katex-display">'
    return [
        (html.unescape(m.group(2)), m.group(1) == display)
        for m in re.finditer(
            r'(<span class="katex-display">)?<span class="katex">.*?'
            r'<annotation encoding="application/x-tex">(.*?)</annotation>',
            page,
            re.S,
        )
    ]


def test_inline_and_display_math_come_out_as_katex_html(katex) -> None:
    out = typeset.typeset(PAGE, katex.render, "note.md")
    assert formulas(out) == [
        ("2\\frac{p-1}{p}\\,n", False),
        ("s < t", False),
        ("t = \\alpha + n\\beta", True),
    ]
    text = re.sub(r"<annotation\b.*?</annotation>", "", out, flags=re.S)
    text = text.replace("<code>\\(kept\\)</code>", "")
    assert "\\(" not in text and "\\[" not in text and "\\frac" not in text
    assert out.count('<span class="arithmatex"><span class="katex">') == 2
    assert out.count('<div class="arithmatex"><span class="katex-display">') == 1
    assert "It costs $5 and $6, and <code>\\(kept\\)</code> is code." in out


def test_notebook_markdown_dollars_are_typeset_code_and_output_are_not(katex) -> None:
    out = typeset.typeset(NOTEBOOK, katex.render, "notebooks/n.ipynb")
    assert formulas(out) == [("m", False), ("L = m + \\log d", True)]
    assert "<code>$not math$</code>" in out
    assert "<pre>$ python -m x: $5</pre>" in out
    # dollars outside a notebook are text
    assert typeset.typeset("<p>$m$</p>", katex.render) == "<p>$m$</p>"


def test_one_process_typesets_every_page_one_request_each(katex) -> None:
    requests = []

    def counted(items):
        requests.append(len(items))
        return katex.render(items)

    typeset.typeset(PAGE, counted)
    pid = katex.proc.pid
    typeset.typeset(NOTEBOOK, counted)
    assert katex.proc.pid == pid and requests == [3, 2]
    assert typeset.typeset("<p>no math</p>", counted) == "<p>no math</p>"
    assert requests == [3, 2]  # a page without math asks nothing


def test_a_formula_katex_rejects_fails_the_build_naming_it(katex) -> None:
    bad = '<span class="arithmatex">\\(\\frac{1}{\\)</span>'
    with pytest.raises(
        PluginError, match=r"posts/x\.md: KaTeX cannot typeset '\\\\frac"
    ):
        typeset.typeset(bad, katex.render, "posts/x.md")
    good = '<span class="arithmatex">\\(x\\)</span>'
    assert formulas(typeset.typeset(good, katex.render)) == [("x", False)]
