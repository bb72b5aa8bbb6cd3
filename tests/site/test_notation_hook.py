"""hooks/notation.py: the notation page's rows are real (each listed note uses its
symbol), and a note's first use of a symbol on its own links to its row, around the
math KaTeX typesets, never inside a heading, code or another link."""

from __future__ import annotations

import html
import re

import pytest
import yaml
from conftest import REPO, load_hook
from mkdocs.exceptions import PluginError

notation = load_hook("notation")
typeset = load_hook("typeset")

POSTS = {
    p.stem[len("2026-01-01-") :]: p for p in (REPO / "docs/blog/posts").glob("*.md")
}
SYMBOLS = yaml.safe_load(
    (REPO / "docs" / "notation.md").read_text(encoding="utf-8").split("---")[1]
)["symbols"]
MATH = re.compile(r"(?<![\\$])\$\$(.+?)\$\$|(?<![\\$])\$([^$\n]+?)\$", re.S)


def span(tex: str) -> str:
    """An inline formula as pymdownx.arithmatex (generic) writes it."""
    return f'<span class="arithmatex">\\({html.escape(tex)}\\)</span>'


ROWS = [
    {"tex": "p", "id": "p", "means": "ranks, $0$ to `p`", "notes": ["x"]},
    {"tex": "\\alpha", "id": "alpha", "means": "latency", "notes": ["x"]},
]
ALPHA = span("\\alpha")
PAGE = (
    f"<h2>Cost on {span('p')} ranks</h2>\n"
    f"<p>It sends {span('2(p-1)')} messages, <code>$p$</code>, then {span('p = 4')}"
    f" and {span('p')} again; <a href='x'>{ALPHA}</a> and {ALPHA}"
    f" and {span('s < t')}.</p>"
)


def test_the_first_use_on_its_own_is_linked_once() -> None:
    out = notation.link_first_uses(PAGE, ROWS, "../notation/")
    links = re.findall(r'<a class="cp-symbol" href="([^"]+)" title="([^"]+)">', out)
    assert [h for h, _ in links] == ["../notation/#p", "../notation/#alpha"]
    assert links[0][1] == "p: ranks, 0 to p"  # the tooltip says it in plain text
    # p = 4 is the first use outside the heading, and 2(p-1) is not p on its own
    assert f'title="p: ranks, 0 to p">{span("p = 4")}</a>' in out
    assert out.count(span("p")) == 2 and f">{span('p')}</a>" not in out
    # the formula already in a link is left alone; the next one is linked
    assert out.count(f">{ALPHA}</a>") == 2
    assert notation.link_first_uses(PAGE, [], "../notation/") == PAGE


def test_the_link_holds_katex_output_whole() -> None:
    katex = typeset.Katex(REPO / "node_modules")
    try:
        out = typeset.typeset(
            notation.link_first_uses(PAGE, ROWS, "n/"), katex.render, "x.md"
        )
    finally:
        katex.close()
    assert "\\(" not in out  # every formula typeset
    linked = re.findall(r'<a class="cp-symbol"[^>]*>(.*?)</a>', out, re.S)
    assert len(linked) == 2
    for inner, tex in zip(linked, ("p = 4", "\\alpha")):
        assert inner.startswith('<span class="arithmatex"><span class="katex">')
        assert inner.endswith("</span></span>")  # the typeset span, closed inside
        note = re.search(r'<annotation encoding="application/x-tex">(.*?)<', inner)
        assert html.unescape(note.group(1)) == tex


@pytest.mark.parametrize(
    "rows, words",
    [
        ([{"tex": "p", "id": "p", "means": "x"}], "needs tex, id, means and notes"),
        ([ROWS[0], {**ROWS[1], "id": "p"}], "id 'p' is used twice"),
        ([{**ROWS[0], "notes": ["nowhere"]}], "no note has slug 'nowhere'"),
        ([ROWS[0], {**ROWS[0], "id": "p2"}], "one meaning a note"),
    ],
)
def test_a_bad_row_stops_the_build_naming_it(rows, words) -> None:
    with pytest.raises(PluginError) as err:
        notation.check(rows, {"x": ("blog/posts/x.md", "X")})
    assert str(err.value).startswith("notation.md: symbols[") and words in str(
        err.value
    )


def used_in(tex: str, formula: str) -> bool:
    """Whether a note's formula uses the symbol: a command whole, a letter anywhere
    outside command names and text (TeX writes bsh for b·s·h)."""
    if tex.startswith("\\"):
        return re.search(re.escape(tex) + r"(?![A-Za-z])", formula) is not None
    bare = r"\\(?:text|mathrm|operatorname)\s*\{[^{}]*\}|\\[A-Za-z]+"
    return tex in re.sub(bare, " ", formula)


def formulas(slug: str) -> list[str]:
    text = POSTS[slug].read_text(encoding="utf-8").split("---", 2)[2]
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    return [a or b for a, b in MATH.findall(text)]


def test_every_row_is_used_by_the_notes_it_lists() -> None:
    assert len(SYMBOLS) >= 30
    unused = [
        (row["id"], slug)
        for row in SYMBOLS
        for slug in row["notes"]
        if not any(used_in(row["tex"], f) for f in formulas(slug))
    ]
    assert not unused, unused
    assert used_in("b", "8bsh(t-1)/t") and not used_in("a", "\\alpha + \\text{a}")


def test_built_notes_link_their_first_uses_to_rows_that_exist(built_site) -> None:
    page = (built_site / "notation" / "index.html").read_text(encoding="utf-8")
    ids = set(re.findall(r'<span id="([^"]+)"></span>', page))
    assert ids == {row["id"] for row in SYMBOLS}
    assert page.count('<span class="katex">') >= len(SYMBOLS)
    linked = 0
    for row in SYMBOLS:
        for slug in row["notes"]:
            html_ = next((built_site / "blog").glob(f"20*/*/*/{slug}/index.html"))
            text = html_.read_text(encoding="utf-8")
            hrefs = re.findall(
                rf'<a class="cp-symbol" href="([^"]+#{re.escape(row["id"])})"[^>]*>'
                r'<span class="arithmatex"><span class="katex">',
                text,
            )
            expected = any(notation.names(f, row["tex"]) for f in formulas(slug))
            assert len(hrefs) == int(expected), (slug, row["id"], hrefs)
            for href in hrefs:
                target = (html_.parent / href.split("#")[0]).resolve() / "index.html"
                assert target == (built_site / "notation" / "index.html").resolve()
            linked += len(hrefs)
    assert linked >= 40, linked
