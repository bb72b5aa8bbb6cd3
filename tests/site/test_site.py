"""The built site: strict build, feeds, autodiscovery, site map, links, charts, and
nothing fetched from another host."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import feedparser
import pytest
import yaml
from conftest import REPO, load_hook

POSTS = sorted((REPO / "docs" / "blog" / "posts").glob("*.md"))


def front_matter(path: Path) -> dict:
    return yaml.safe_load(path.read_text(encoding="utf-8").split("---", 2)[1])


class Refs(HTMLParser):
    """Every href/src of a page, with the tag it came from."""

    def __init__(self) -> None:
        super().__init__()
        self.refs: list[tuple[str, str, dict]] = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        for key in ("href", "src"):
            if a.get(key):
                self.refs.append((tag, a[key], a))


def refs(page: Path) -> list[tuple[str, str, dict]]:
    parser = Refs()
    parser.feed(page.read_text(encoding="utf-8"))
    return parser.refs


def pages(site: Path) -> list[Path]:
    return sorted(site.rglob("*.html"))


def test_every_note_has_a_scalar_date_title_and_series() -> None:
    assert POSTS, "no notes"
    for post in POSTS:
        meta = front_matter(post)
        assert hasattr(meta["date"], "year"), (
            f"{post.name}: date must be a scalar YYYY-MM-DD"
        )
        assert post.name.startswith(meta["date"].isoformat()), (
            f"{post.name}: file name and date disagree"
        )
        assert meta["title"] and meta["categories"] and meta.get("description")


def note_date(title: str):
    return next(
        front_matter(p)["date"] for p in POSTS if front_matter(p)["title"] == title
    )


@pytest.mark.parametrize("feed", ["feed_rss_created.xml", "feed_rss_updated.xml"])
def test_rss_feeds_parse_with_one_entry_per_note(built_site: Path, feed: str) -> None:
    parsed = feedparser.parse((built_site / feed).read_bytes())
    assert not parsed.bozo, parsed.get("bozo_exception")
    assert parsed.version == "rss20"
    assert {e.title for e in parsed.entries} == {
        front_matter(p)["title"] for p in POSTS
    }
    for entry in parsed.entries:
        date = note_date(entry.title)
        assert entry.published_parsed[:3] == (date.year, date.month, date.day), (
            f"{entry.title}: date not from the note"
        )
        assert entry.id and entry.link and entry.summary
    # RSS 2.0's managingEditor is an email address; a name goes in dc:creator
    channel = (built_site / feed).read_text(encoding="utf-8").split("<item>")[0]
    assert "<managingEditor>" not in channel or "@" in channel
    assert parsed.feed.author == "The Commonplace authors"


def test_json_feed_has_one_item_per_note(built_site: Path) -> None:
    """feedparser reads no JSON Feed, so check it against the JSON Feed 1.1 spec's
    required fields."""
    feed = json.loads(
        (built_site / "feed_json_created.json").read_text(encoding="utf-8")
    )
    assert (
        feed["version"].startswith("https://jsonfeed.org/version/1") and feed["title"]
    )
    assert {item["title"] for item in feed["items"]} == {
        front_matter(p)["title"] for p in POSTS
    }
    for item in feed["items"]:
        assert (
            item["id"]
            and item["url"]
            and ("content_html" in item or "content_text" in item)
        )
        assert item["date_published"].startswith(note_date(item["title"]).isoformat())


PLACEHOLDER = "commonplace.example.org"
DEPLOYED = "https://notes.example.net/commonplace/"


def test_a_deploy_rebuild_keeps_feed_ids_and_leaves_no_placeholder(
    built_site: Path, tmp_path: Path
) -> None:
    """A second build, as the deploy job makes it (SITE_URL and DEPLOY=1): every
    entry keeps its id and date (only the host differs), and no absolute URL in the
    feeds or sitemap.xml points at the placeholder host."""
    import os
    import subprocess
    import sys

    subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(tmp_path)],
        cwd=REPO,
        check=True,
        capture_output=True,
        env={
            **os.environ,
            "NO_MKDOCS_2_WARNING": "1",
            "SITE_URL": DEPLOYED,
            "DEPLOY": "1",
        },
    )
    ids = [
        {
            (e.title, e.id.replace(f"https://{PLACEHOLDER}/", DEPLOYED), e.published)
            for e in feedparser.parse(
                (site / "feed_rss_created.xml").read_bytes()
            ).entries
        }
        for site in (built_site, tmp_path)
    ]
    assert ids[0] == ids[1]
    outputs = [
        *tmp_path.glob("feed_*"),
        *tmp_path.glob("feeds/*"),
        tmp_path / "sitemap.xml",
    ]
    assert len(outputs) > 5
    for out in outputs:
        text = out.read_text(encoding="utf-8")
        assert PLACEHOLDER not in text, out.name
        assert DEPLOYED in text, out.name
    rss = feedparser.parse((tmp_path / "feed_rss_created.xml").read_bytes())
    assert rss.feed.image.href == DEPLOYED + "assets/images/favicon.png"


def test_every_page_announces_the_feeds(built_site: Path) -> None:
    for page in pages(built_site):
        alternates = {
            (a.get("type"), href)
            for tag, href, a in refs(page)
            if tag == "link" and a.get("rel") == "alternate"
        }
        types = {t for t, _ in alternates}
        assert {"application/rss+xml", "application/feed+json"} <= types, page
        for _, href in alternates:
            base = built_site if href.startswith("/") else page.parent
            assert (base / href.lstrip("/")).resolve().is_file(), (
                f"{page}: feed link {href} is broken"
            )


def test_site_map_lists_every_note(built_site: Path) -> None:
    """Each note is linked twice from the site map (by series, by date), and nothing
    else is."""
    page = built_site / "sitemap" / "index.html"
    targets = [
        (page.parent / href).resolve()
        for tag, href, _ in refs(page)
        if tag == "a" and re.match(r"^(\.\./)+blog/\d{4}/\d\d/\d\d/", href)
    ]
    counts = {t: targets.count(t) for t in targets}
    assert len(counts) == len(POSTS), sorted(str(t) for t in counts)
    assert set(counts.values()) == {2}
    for post in POSTS:
        meta = front_matter(post)
        assert any(
            t.parent.name == f"{meta['date']:%d}"
            and t.parent.parent.name == f"{meta['date']:%m}"
            for t in counts
        ), f"{post.name} is not on the site map"


def test_no_broken_internal_links(built_site: Path) -> None:
    broken = []
    for page in pages(built_site):
        for tag, ref, _ in refs(page):
            parts = urlsplit(ref)
            if parts.scheme or ref.startswith(("#", "mailto:", "//", "data:")):
                continue
            base = (
                built_site if parts.path.startswith("/") else page.parent
            )  # 404.html uses site-absolute paths
            target = (base / unquote(parts.path).lstrip("/")).resolve()
            if target.is_dir():
                target = target / "index.html"
            if not target.exists():
                broken.append(f"{page.relative_to(built_site)} → {ref}")
    assert not broken, "\n".join(broken[:30])


def test_nothing_is_loaded_from_another_host(built_site: Path) -> None:
    """Scripts, styles, fonts and images all come from the site itself."""
    for page in pages(built_site):
        for tag, ref, attrs in refs(page):
            loads = tag in {"script", "img", "iframe", "source"} or (
                tag == "link"
                and attrs.get("rel")
                in {"stylesheet", "preload", "icon", "modulepreload"}
            )
            if loads:
                assert not re.match(r"^(https?:)?//", ref), (
                    f"{page.relative_to(built_site)} loads {ref}"
                )
    for css in built_site.rglob("*.css"):
        assert not re.search(
            r"@import\s+url\(\s*['\"]?(https?:)?//|fonts\.googleapis",
            css.read_text(encoding="utf-8"),
        ), css


def test_notes_embed_code_from_snippets_and_their_results(built_site: Path) -> None:
    """A note shows its module's code (from snippets/, not pasted) and its last run's
    provenance."""
    for post in POSTS:
        text = post.read_text(encoding="utf-8")
        assert re.search(r'--8<-- "snippets/(?:\w+/)*\w+\.py:\w+"', text), (
            f"{post.name} embeds no snippet section"
        )
        assert re.search(r'--8<-- "results/[\w.]+\.md"', text), (
            f"{post.name} shows no result"
        )
    html = "".join(
        p.read_text(encoding="utf-8") for p in (built_site / "blog").rglob("index.html")
    )
    assert html.count('class="cp-provenance"') >= len(POSTS)


@pytest.mark.parametrize(
    "include, missing",
    [
        ('--8<-- "results/no_such_snippet.md"', "results/no_such_snippet.md"),
        (
            '```python\n--8<-- "snippets/comm/process_groups.py:no_such_section"\n```',
            "no_such_section",
        ),
        (
            '```python\n--8<-- "snippets/no_such_module.py:who"\n```',
            "no_such_module.py",
        ),
    ],
)
def test_a_note_including_something_missing_fails_the_build(
    tmp_path: Path, include: str, missing: str
) -> None:
    """The same config, a one-note docs folder: the strict build must refuse it."""
    import os
    import shutil
    import subprocess
    import sys

    for name in ("hooks", "overrides", "snippets"):
        shutil.copytree(
            REPO / name, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__")
        )
    shutil.copy(REPO / "mkdocs.yml", tmp_path)
    (tmp_path / "node_modules").symlink_to(REPO / "node_modules")
    posts = tmp_path / "docs" / "blog" / "posts"
    posts.mkdir(parents=True)
    for page in ("index.md", "sitemap.md", "subscribe.md", "blog/index.md"):
        shutil.copy(REPO / "docs" / page, tmp_path / "docs" / page)
    shutil.copytree(REPO / "docs" / "assets", tmp_path / "docs" / "assets")
    (posts / "2026-01-01-broken.md").write_text(
        "---\ntitle: Broken\ndate: 2026-01-01\npart: 1\ncategories:\n"
        "  - Distributed training, by hand\n"
        f"description: x\n---\n\n# Broken\n\n{include}\n",
        encoding="utf-8",
    )
    cfg = (
        (tmp_path / "mkdocs.yml")
        .read_text()
        .replace("  - Notebooks:", "  - NotebooksGone:")
    )
    (tmp_path / "mkdocs.yml").write_text(cfg)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "mkdocs",
            "build",
            "--strict",
            "-d",
            str(tmp_path / "site"),
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert proc.returncode != 0
    assert missing in proc.stderr


def built_page(site: Path, post: Path) -> Path:
    """The built page of a note: blog/<yyyy>/<mm>/<dd>/<slug>/index.html."""
    meta = front_matter(post)
    page = site / "blog" / f"{meta['date']:%Y/%m/%d}" / meta["slug"] / "index.html"
    assert page.is_file(), f"no built page for {post.name} at {page}"
    return page


def series_posts() -> dict[str, list[Path]]:
    """Each series' notes in the order of their ``part``, from the front matter."""
    by_series: dict[str, list[Path]] = {}
    for post in sorted(POSTS, key=lambda p: front_matter(p)["part"]):
        by_series.setdefault(front_matter(post)["categories"][0], []).append(post)
    return by_series


def test_every_series_runs_part_1_to_n() -> None:
    for series, posts in series_posts().items():
        parts = [front_matter(p)["part"] for p in posts]
        assert parts == list(range(1, len(posts) + 1)), (series, parts)


AHEAD = re.compile(r"\b(later|next|coming)\b", re.I)
LINK = re.compile(r"\]\((\d{4}-\d\d-\d\d-[a-z0-9-]+\.md)[^)]*\)")
NEAR = 120  # characters either side of the link


def links_ahead_unannounced(post: Path) -> list[str]:
    """Links from ``post`` to a later part of its own series with none of "later",
    "next", "coming" within NEAR characters of the link."""
    meta = front_matter(post)
    text = post.read_text(encoding="utf-8").split("---", 2)[2]
    found = []
    for m in LINK.finditer(text):
        target = post.parent / m.group(1)
        other = front_matter(target)
        if other["categories"][0] != meta["categories"][0]:
            continue
        if other["part"] <= meta["part"]:
            continue
        start = text.rfind("[", 0, m.start())
        near = text[max(0, start - NEAR) : m.end() + NEAR]
        if not AHEAD.search(near):
            found.append(f"{post.name} -> {m.group(1)}")
    return found


def test_a_link_to_a_later_part_says_so() -> None:
    """A reader in part 3 who follows a link to part 7 is told it is ahead."""
    found = [link for post in POSTS for link in links_ahead_unannounced(post)]
    assert not found, found


def test_the_link_check_catches_an_unannounced_link(tmp_path: Path) -> None:
    head = "---\ntitle: {t}\ndate: 2026-01-0{p}\npart: {p}\ncategories:\n  - S\n---\n"
    first = tmp_path / "2026-01-01-a.md"
    second = tmp_path / "2026-01-02-b.md"
    second.write_text(head.format(t="B", p=2) + "\nSee [A](2026-01-01-a.md).\n")
    first.write_text(head.format(t="A", p=1) + "\nSee [B](2026-01-02-b.md).\n")
    assert links_ahead_unannounced(first) == ["2026-01-01-a.md -> 2026-01-02-b.md"]
    assert links_ahead_unannounced(second) == []  # a link back needs no word
    first.write_text(
        head.format(t="A", p=1) + "\nIn a later note, [B](2026-01-02-b.md).\n"
    )
    assert links_ahead_unannounced(first) == []


def footer_links(html: str) -> dict[str, list[str]]:
    return {
        side: re.findall(rf'href="([^"]+)" class="md-footer__link[^"]*--{side}',
                         html)
        for side in ("prev", "next")
    }  # fmt: skip


def test_one_previous_and_one_next_and_both_within_the_series(built_site: Path) -> None:
    """The footer's previous/next are the series' neighbours (not the blog's by
    date), there is no second "Next", and the note says which part it is."""
    for series, posts in series_posts().items():
        for i, post in enumerate(posts):
            page = built_page(built_site, post)
            html = page.read_text(encoding="utf-8")
            links = footer_links(html)
            for side, j in (("prev", i - 1), ("next", i + 1)):
                expected = (
                    [built_page(built_site, posts[j]).parent.resolve()]
                    if 0 <= j < len(posts)
                    else []
                )
                got = [(page.parent / h).resolve() for h in links[side]]
                assert got == expected, f"{post.name}: {side} {got} != {expected}"
            nav = html.split('class="cp-series-nav"', 1)[-1].split("</nav>", 1)[0]
            hrefs = re.findall(r'href="([^"]+)"', nav)
            assert all("category/" in h for h in hrefs), f"{post.name}: {hrefs}"
            assert f"Part {i + 1} of {len(posts)} in the series" in html, post.name


def test_series_pages_list_their_parts_in_order_on_one_page(built_site: Path) -> None:
    for series, posts in series_posts().items():
        pages_with = [
            p
            for p in (built_site / "blog" / "category").glob("*/index.html")
            if re.search(rf"<h1[^>]*>{re.escape(series)}<", p.read_text("utf-8"))
        ]
        assert len(pages_with) == 1, (series, pages_with)
        html = pages_with[0].read_text(encoding="utf-8")
        order = [int(n) for n in re.findall(r"Part (\d+) of \d+ in the series", html)]
        assert order == list(range(1, len(posts) + 1)), (series, order)
        for post in posts:  # every note, so none is on a page 2
            assert front_matter(post)["slug"] in html, (series, post.name)


SPEC = re.compile(
    r'<script type="application/json" class="cp-chart__spec">(.*?)</script>', re.S
)


def test_chart_pages_carry_valid_specs(built_site: Path) -> None:
    from snippets.core.charts import validate

    with_charts = 0
    for page in pages(built_site):
        html = page.read_text(encoding="utf-8")
        if '<figure class="cp-chart">' not in html:
            continue
        with_charts += 1
        specs = SPEC.findall(html)
        where = page.relative_to(built_site)
        assert len(specs) == html.count('<figure class="cp-chart">'), where
        for text in specs:
            validate(json.loads(text))
        assert html.count("<figcaption>") >= len(specs), f"{where}: no caption"
    assert with_charts, "no page has a chart"


def loaded(page: Path, site: Path) -> set[str]:
    """The site paths of every script and stylesheet a page loads."""
    found = set()
    for tag, ref, attrs in refs(page):
        if tag == "script" or (tag == "link" and attrs.get("rel") == "stylesheet"):
            path = (page.parent / unquote(urlsplit(ref).path)).resolve()
            if path.is_relative_to(site.resolve()):
                found.add(path.relative_to(site.resolve()).as_posix())
    return found


def test_each_page_loads_what_its_markers_need_and_no_more(built_site: Path) -> None:
    """hooks/page_assets.py is the one table of what a marker needs: a page loads
    exactly the files of the rows whose markers it holds (no Vega without a chart, no
    KaTeX without math), each of them is in the site, and every row is used."""
    table = load_hook("page_assets")
    listed = {f for _, row in table.ASSETS for f in row.scripts + row.styles}
    used = set()
    for page in pages(built_site):
        html = page.read_text(encoding="utf-8")
        want = table.needs(html)
        found = loaded(page, built_site) & listed
        where = page.relative_to(built_site)
        assert found == {*want.styles, *want.scripts}, where
        for path in found:
            assert (built_site / path).is_file(), f"{where}: {path} missing"
        used |= {str(m) for m, _ in table.ASSETS if table.holds(html, m)}
    assert used == {str(m) for m, _ in table.ASSETS}, "a row no page needs"


def series_slug(series: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", series.lower()).strip("-")


def test_a_feed_per_series_with_dates_from_the_notes(built_site: Path) -> None:
    """feeds/<series>.xml and .json: exactly that series' notes, the notes' dates,
    plain-text summaries equal to the front-matter description, a named author."""
    for series, posts in series_posts().items():
        slug = series_slug(series)
        rss = feedparser.parse((built_site / "feeds" / f"{slug}.xml").read_bytes())
        assert not rss.bozo and rss.version == "rss20", rss.get("bozo_exception")
        titles = {front_matter(p)["title"] for p in posts}
        assert {e.title for e in rss.entries} == titles, series
        for entry in rss.entries:
            date = note_date(entry.title)
            assert entry.published_parsed[:3] == (date.year, date.month, date.day)
        newest = max(front_matter(p)["date"] for p in posts)
        assert rss.feed.published_parsed[:3] == (newest.year, newest.month, newest.day)
        feed = json.loads((built_site / "feeds" / f"{slug}.json").read_text("utf-8"))
        assert {i["title"] for i in feed["items"]} == titles
        assert feed["authors"] and feed["authors"][0]["name"]
    whole = json.loads((built_site / "feed_json_created.json").read_text("utf-8"))
    assert whole["authors"] and whole["authors"][0]["name"]
    for entry in feedparser.parse(
        (built_site / "feed_rss_created.xml").read_bytes()
    ).entries:
        meta = next(
            front_matter(p) for p in POSTS if front_matter(p)["title"] == entry.title
        )
        assert "`" not in entry.summary, entry.title
        assert entry.summary == meta["description"].replace("`", ""), entry.title


def test_a_local_feed_asks_no_other_host(built_site: Path) -> None:
    """The stylesheet shows the channel image: with the placeholder host there is
    none, so the feed opened in a browser fetches nothing from elsewhere."""
    for rss in [built_site / "feed_rss_created.xml", *built_site.glob("feeds/*.xml")]:
        text = rss.read_text(encoding="utf-8")
        assert "<image>" not in text and "None" not in text, rss
        assert 'href="' in text.split("?>", 2)[1] and "rss.xsl" in text, rss
        xsl = re.search(r'xml-stylesheet type="text/xsl" href="([^"]+)"', text)
        assert (rss.parent / xsl.group(1)).resolve().is_file(), rss


def test_a_deploy_build_refuses_the_placeholder_host(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1", "DEPLOY": "1"}
    env.pop("SITE_URL", None)
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(tmp_path)],
        cwd=REPO,
        capture_output=True,
        text=True,
        env=env,
    )
    assert proc.returncode != 0
    assert "SITE_URL" in proc.stderr and "placeholder" in proc.stderr


def test_notebook_page_is_findable_offline_and_carries_provenance(
    built_site: Path,
) -> None:
    page = built_site / "notebooks" / "tiling-step-by-step" / "index.html"
    html = page.read_text(encoding="utf-8")
    assert "cdnjs" not in html and "mathjax" not in html.lower()
    assert 'class="cp-provenance"' in html
    # the run's own line, an output inside the notebook, not one the build wrote
    assert html.index('class="cp-provenance"') > html.index('class="jupyter-wrapper"')
    assert 'class="katex"' in html  # its $…$ math, typeset at build time
    linked_from = [
        p
        for p in [built_site / "sitemap" / "index.html", *(built_site / "blog").rglob(
            "index.html")]
        if "notebooks/tiling-step-by-step/" in p.read_text(encoding="utf-8")
    ]  # fmt: skip
    assert built_site / "sitemap" / "index.html" in linked_from
    assert any("/20" in str(p) for p in linked_from), "no note links the notebook"


# TeX a reader would see if no script ran: arithmatex's delimiters, a notebook's
# dollars, a TeX command. Code, scripts and KaTeX's MathML annotation may hold TeX.
RAW_TEX = re.compile(r"\\[(\[]|\\[)\]]|\$\$|\$[^$\s<]{1,40}\$|\\(?:frac|alpha|cdot)\b")
NOT_TEXT = re.compile(
    r"<(pre|code|script|style|annotation|svg)\b.*?</\1>|<[^>]+>|&\w+;", re.S
)


def test_no_page_holds_raw_tex_before_any_script_runs(built_site: Path) -> None:
    """Math is typeset at build time (hooks/typeset.py): the text of every page, as it
    arrives, holds no TeX, and no page loads KaTeX's script."""
    raw, typeset = [], 0
    for page in pages(built_site):
        html = page.read_text(encoding="utf-8")
        typeset += html.count('<span class="katex">')
        text = NOT_TEXT.sub(" ", html)
        raw += [(str(page.relative_to(built_site)), m) for m in RAW_TEX.findall(text)]
        assert "katex.min.js" not in html and "auto-render" not in html, page
    assert typeset > 100, typeset  # the notes have hundreds of formulas
    assert not raw, raw[:10]


def test_no_page_loads_or_holds_mermaid(built_site: Path) -> None:
    """Diagrams are inline SVG: no page loads mermaid (3.6 MB) or holds an element
    Material's bundle would fetch mermaid from a CDN to draw."""
    for page in pages(built_site):
        html = page.read_text(encoding="utf-8")
        assert 'class="mermaid"' not in html, page
        assert not [r for _, r, _ in refs(page) if "mermaid" in r], page
    assert not list(built_site.rglob("mermaid*.js"))
    notes = [built_page(built_site, p).read_text(encoding="utf-8") for p in POSTS]
    assert sum(n.count('<svg class="cp-diagram"') for n in notes) == 4


NOTE_WEIGHT = 1_500_000  # bytes: a note with the scripts and stylesheets it loads


def weight(page: Path, site: Path) -> int:
    """The page's bytes and those of every same-origin script and stylesheet it
    loads, before compression."""
    return page.stat().st_size + sum(
        (site / f).stat().st_size for f in loaded(page, site)
    )


def test_every_note_weighs_under_1_5_mb_with_what_it_loads(built_site: Path) -> None:
    heavy = []
    for post in POSTS:
        page = built_page(built_site, post)
        if (size := weight(page, built_site)) > NOTE_WEIGHT:
            where = page.parent.relative_to(built_site).as_posix()
            heavy.append(f"{where}: {size / 1e6:.2f} MB")
    assert not heavy, "\n".join(heavy)


def test_search_index_holds_no_raw_tex(built_site: Path) -> None:
    index = json.loads((built_site / "search" / "search_index.json").read_text("utf-8"))
    raw = [
        (d["location"], m)
        for d in index["docs"]
        for m in re.findall(r"\\[(\[]|\\(?:frac|alpha|cdot|infty|log)\b", d["text"])
    ]
    assert not raw, raw[:10]


def test_search_index_keeps_run_commands_not_their_printouts(built_site: Path) -> None:
    index = json.loads((built_site / "search" / "search_index.json").read_text("utf-8"))
    text = " ".join(d["text"] for d in index["docs"])
    printed = (built_site / "blog/2026/11/17/process-groups/index.html").read_text()
    assert "$ python -m snippets run process_groups" in text  # the command stays
    line = re.search(r"all_reduce\(rank\) = [^<]*", printed)  # a line the run prints
    assert line and line.group(0) not in text  # the printout does not
    ring = [d["location"] for d in index["docs"] if "def ring_allreduce" in d["text"]]
    assert any("ring-allreduce" in loc for loc in ring)  # code keeps its names
    body = "ranks, me = group_ranks(group)"  # a line inside several shown functions
    assert body in (REPO / "snippets/comm/collective/all_to_all.py").read_text()
    assert body not in text  # and drops its bodies


def test_home_page_and_provenance_link_the_repository(built_site: Path) -> None:
    """Links go to the repository hooks/repo_links.py derives from this environment
    and checkout (its own tests cover the derivation), at its ref; with none, none."""
    import os

    hook = load_hook("repo_links")
    repo = hook.repo_url(os.environ, hook.git("remote", "get-url", "origin", cwd=REPO))
    ref = hook.code_ref(os.environ, hook.git("rev-parse", "HEAD", cwd=REPO))
    home = (built_site / "index.html").read_text(encoding="utf-8")
    assert "&lt;this repository&gt;" not in home and "<this repository>" not in home
    for series, posts in series_posts().items():
        assert series in home and front_matter(posts[0])["slug"] in home, series
    assert 'href="tags/"' in home or 'href="tags/index.html"' in home
    note = next((built_site / "blog").glob("20*/*/*/*/index.html")).read_text("utf-8")
    if repo is None:
        assert "git clone REPOSITORY-URL" in re.sub(r"<[^>]+>", "", home)
        assert "/commit/" not in note
        assert '<span class="filename"><a' not in note
        return
    commit_at, file_at = (re.escape(f) for f in hook.links(repo))
    assert f"git clone {repo} commonplace" in re.sub(r"<[^>]+>", "", home)
    assert re.search(
        r'cp-provenance">[^<]*commit <a href="'
        + commit_at.replace(r"\{sha\}", "[0-9a-f]{7,40}"),
        note,
    )
    file_at = file_at.replace(r"\{ref\}", re.escape(ref)).replace(r"\{path\}", "")
    assert re.search(r'class="filename"><a href="' + file_at + "snippets/", note)


def test_tags_page_lists_every_tag_and_notes_link_to_it(built_site: Path) -> None:
    tags_page = (built_site / "tags" / "index.html").read_text(encoding="utf-8")
    for post in POSTS:
        html = built_page(built_site, post).read_text(encoding="utf-8")
        for tag in front_matter(post).get("tags") or []:
            link = rf'<a href="[^"]*tags/#[^"]*" class="md-tag">\s*{re.escape(tag)}'
            assert re.search(link, html), (post.name, tag)
            assert re.search(rf">\s*{re.escape(tag)}\s*<", tags_page), tag


@pytest.mark.parametrize(
    "feed", ["feed_rss_created.xml", "feeds/distributed-training-by-hand.xml"]
)
def test_notes_of_one_day_get_distinct_times_in_reading_order(
    built_site: Path, feed: str
) -> None:
    """Notes written the same day are stamped minutes apart, so a feed reader sorts a
    series' parts of that day in the order they are read (and never ties them)."""
    by_title = {front_matter(p)["title"]: front_matter(p) for p in POSTS}
    entries = feedparser.parse((built_site / feed).read_bytes()).entries
    stamps = [(tuple(e.published_parsed[:6]), by_title[e.title]) for e in entries]
    assert len({s for s, _ in stamps}) == len(stamps), "two notes share a time"
    days = {m["date"] for _, m in stamps}
    shared = [d for d in days if sum(m["date"] == d for _, m in stamps) > 1]
    assert shared, "no day with two notes: nothing to order"
    for stamp, meta in stamps:
        assert stamp[:3] == (meta["date"].year, meta["date"].month, meta["date"].day)
    when = {m["title"]: stamp for stamp, m in stamps}
    for posts in series_posts().values():
        titles = [front_matter(p)["title"] for p in posts]
        seq = [when[title] for title in titles if title in when]
        same_day = [(a, b) for a, b in zip(seq, seq[1:]) if a[:3] == b[:3]]
        assert all(a < b for a, b in same_day), same_day


def allowed_series() -> list[str]:
    """mkdocs.yml's categories_allowed, read as lines (the file holds !ENV tags)."""
    lines = (REPO / "mkdocs.yml").read_text(encoding="utf-8").splitlines()
    start = next(i for i, ln in enumerate(lines) if "categories_allowed:" in ln)
    found, indent = [], len(lines[start + 1]) - len(lines[start + 1].lstrip())
    for line in lines[start + 1 :]:
        if len(line) - len(line.lstrip()) != indent or not line.strip().startswith(
            "- "
        ):
            break
        found.append(line.strip()[2:])
    return found


def first_series() -> str:
    """The series whose first note was written first: the home page starts there."""
    first = {
        s: min(front_matter(p)["date"] for p in ps) for s, ps in series_posts().items()
    }
    return min(first, key=lambda s: (first[s], s))


def test_home_page_lists_each_series_once_with_its_count_and_a_start(
    built_site: Path,
) -> None:
    home = (built_site / "index.html").read_text(encoding="utf-8")
    text = re.sub(r"<[^>]+>", "", home)
    assert sorted(series_posts()) == sorted(allowed_series())
    for series, posts in series_posts().items():
        n = len(posts)
        counted = f"{series}, {n} note{'s' if n != 1 else ''}."
        assert text.count(counted) == 1, counted
        assert home.count(f"<strong>{series}</strong>") == 1, series
    typed = r"\b(\d+|one|two|three|four|five|six|seven|eight|nine) notes?\b"
    source = (REPO / "docs" / "index.md").read_text(encoding="utf-8")
    assert not re.search(typed, source, re.I), "the home page types a count"
    starts = re.findall(r'<a class="[^"]*\bcp-start\b[^"]*" href="([^"]+)"', home)
    starts += re.findall(r'<a href="([^"]+)" class="[^"]*\bcp-start\b', home)
    assert len(starts) == 1, starts
    first = series_posts()[first_series()][0]
    target = (built_site / starts[0]).resolve()
    assert target == built_page(built_site, first).parent.resolve()


def test_search_previews_are_text_never_empty_and_never_a_code_block(
    built_site: Path,
) -> None:
    """A result's preview is its document's text: none is empty, none holds a code
    block (a note's or a notebook cell's), and the tags page has its paragraph."""
    index = json.loads((built_site / "search" / "search_index.json").read_text("utf-8"))
    docs = index["docs"]
    empty = [d["location"] for d in docs if not d["text"].strip()]
    assert not empty, empty
    blocks = [d["location"] for d in docs if "<pre" in d["text"]]
    assert not blocks, blocks
    tags = [d for d in docs if d["location"].startswith("tags/")]
    assert [d["location"] for d in tags] == ["tags/"]
    assert tags[0]["text"].startswith("<p>Every tag a note carries")
    for post in POSTS:
        for tag in front_matter(post).get("tags") or []:
            assert tag in tags[0]["text"], tag
    home = next(d for d in docs if d["location"] == "#run-it-yourself")
    assert "make serve" in home["text"] and "installs, runs" not in home["text"]
