"""Feeds that point where the site is, one per series, with clean summaries.

* The placeholder host: ``site_url`` comes from ``SITE_URL``; without it the build uses
  ``https://commonplace.example.org/``. A local build says so; a deploy build
  (``DEPLOY=1``, set by the deploy job) refuses it.
* The RSS channel image (which the feed's stylesheet shows in a browser) is the site's
  own favicon under the real ``site_url``; with the placeholder there is none, so a feed
  opened from a local build asks no other host for anything.
* Summaries are the notes' front-matter ``description`` with the Markdown backticks
  taken out (the feeds and the pages' ``<meta name="description">`` read it).
* Notes written on the same day get distinct times, so a reader sorts them in the
  order they are read: the day's notes ranked by series (the series whose first note
  is oldest first) and then by ``part``, the k-th of the day stamped at k minutes
  past midnight (the first at 00:00).
* After the rss plugin writes the whole-site feeds, every series gets its own:
  ``feeds/<series-slug>.xml`` (RSS) and ``feeds/<series-slug>.json`` (JSON Feed), the
  same items, filtered by the series (one of the item's categories).
"""

from __future__ import annotations

import json
import logging
import os
import re
import xml.etree.ElementTree as ET
from datetime import datetime, timedelta
from email.utils import format_datetime, parsedate_to_datetime
from pathlib import Path
from urllib.parse import urlsplit

from mkdocs.exceptions import PluginError
from mkdocs.plugins import event_priority
from mkdocs.utils import get_relative_url

PLACEHOLDER_HOST = "commonplace.example.org"
FEEDS_DIR = "feeds"
FAVICON = "assets/images/favicon.png"
log = logging.getLogger("mkdocs.hooks.feeds")
_notes: dict[str, tuple] = {}  # page url -> (date, series, part), from the notes


def uses_placeholder(site_url: str) -> bool:
    return urlsplit(site_url or "").hostname == PLACEHOLDER_HOST


@event_priority(100)  # before the rss plugin reads the image and the site_url
def on_config(config):
    site_url = config.site_url or ""
    if uses_placeholder(site_url):
        if os.environ.get("DEPLOY") == "1":
            raise PluginError(
                f"deploy build with the placeholder site_url {site_url}:"
                " set SITE_URL to where the site is published"
            )
        log.info(
            "site_url is the placeholder %s (set SITE_URL for a deploy build):"
            " feed and sitemap.xml addresses point there",
            site_url,
        )
    rss = config.plugins.get("rss")
    if rss is not None:
        image = os.environ.get("FEED_IMAGE_URL") or (
            "" if uses_placeholder(site_url) else site_url.rstrip("/") + "/" + FAVICON
        )
        rss.config.image = image or None
    return config


def clean_summary(text: str) -> str:
    """Markdown code spans to plain text: the feeds carry no Markdown."""
    return re.sub(r"`+([^`]*)`+", r"\1", text).replace("`", "")


@event_priority(100)  # before the rss plugin reads the description (on_page_content)
def on_page_markdown(markdown, page, config, files):
    meta = page.meta
    if meta.get("categories") and "part" in meta and "date" in meta:
        _notes[page.url] = (meta["date"], meta["categories"][0], meta["part"])
    if isinstance(page.meta.get("description"), str):
        page.meta["description"] = clean_summary(page.meta["description"])
    if "<!-- feeds:series -->" in markdown:
        markdown = markdown.replace("<!-- feeds:series -->", series_table(page, config))
    return markdown


def series_table(page, config) -> str:
    """The Subscribe page's table of per-series feeds."""
    rows = ["| series | RSS 2.0 | JSON Feed 1.1 |", "| --- | --- | --- |"]
    for series, rss, jsn in series_feeds(config):
        links = [
            f'<a href="{get_relative_url(path, page.url)}"><code>{path}</code></a>'
            for path in (rss, jsn)
        ]
        rows.append(f"| {series} | {links[0]} | {links[1]} |")
    return "\n".join(rows)


def series_slug(series: str, config) -> str:
    blog = config.plugins["material/blog"].config
    return blog.categories_slugify(series, blog.categories_slugify_separator)


ATOM = "http://www.w3.org/2005/Atom"
DC = "http://purl.org/dc/elements/1.1/"


def parse(text: str) -> tuple[str, ET.Element, str]:
    """An RSS document as (what comes before ``<rss>``: the XML declaration and the
    stylesheet instruction, which ElementTree does not keep; the ``<rss>`` element;
    what comes after it). Its namespace prefixes are kept for :func:`unparse`."""
    pull = ET.XMLPullParser(events=("start-ns",))
    pull.feed(text)
    for _, (prefix, uri) in pull.read_events():
        ET.register_namespace(prefix, uri)
    ET.register_namespace("dc", DC)  # settle() may add dc:creator
    end = text.rindex("</rss>") + len("</rss>")
    return text[: text.index("<rss")], ET.fromstring(text), text[end:]


def unparse(before: str, rss: ET.Element, after: str) -> str:
    return before + ET.tostring(rss, encoding="unicode") + after


def series_rss(whole: str, series: str, title: str, self_url: str) -> str:
    """The whole-site RSS text with only the items that have ``series`` among their
    categories, and the channel's title and self link made the series'."""
    before, rss, after = parse(whole)
    channel = rss.find("channel")
    for item in channel.findall("item"):
        if series not in [(c.text or "").strip() for c in item.findall("category")]:
            channel.remove(item)
    channel.find("title").text = title
    channel.find(f"{{{ATOM}}}link").set("href", self_url)
    return unparse(before, rss, after)


def settle(text: str) -> str:
    """No image element without an image (the template writes ``<url>None</url>``),
    the author as ``dc:creator`` where it is a name (RSS 2.0's ``managingEditor`` is an
    email address), and the channel dated by its newest note, not by the build."""
    before, rss, after = parse(text)
    channel = rss.find("channel")
    for image in channel.findall("image"):
        if image.findtext("url") == "None":
            channel.remove(image)
    for editor in channel.findall("managingEditor"):
        if "@" not in (editor.text or ""):
            editor.tag = f"{{{DC}}}creator"
    dates = [parsedate_to_datetime(d.text) for d in channel.iterfind("item/pubDate")]
    if dates:
        newest = format_datetime(max(dates))
        for tag in ("pubDate", "lastBuildDate"):
            for stamp in channel.findall(tag):
                stamp.text = newest
    return unparse(before, rss, after)


def minutes_into_day(notes: dict[str, tuple]) -> dict[str, int]:
    """Each note's page url -> its minutes past midnight: its rank within its day by
    (its series' first date, series, part), so a day's notes are distinct, in order."""
    first: dict[str, object] = {}
    for date, series, _ in notes.values():
        first[series] = min(date, first.get(series, date))
    order = sorted(
        notes, key=lambda u: (notes[u][0], first[notes[u][1]], *notes[u][1:])
    )
    minutes: dict[str, int] = {}
    for i, url in enumerate(order):
        same_day = i > 0 and notes[order[i - 1]][0] == notes[url][0]
        minutes[url] = minutes[order[i - 1]] + 1 if same_day else 0
    return minutes


def page_url(link: str, base: str) -> str:
    """A feed item's link as the page url mkdocs gives it (``blog/…/slug/``)."""
    path, root = urlsplit(link).path, urlsplit(base).path
    return path[len(root) :] if path.startswith(root) else path.lstrip("/")


def stagger_rss(text: str, minutes: dict[str, int], base: str) -> str:
    """Every item's pubDate moved on by its minutes into the day."""
    before, rss, after = parse(text)
    for item in rss.iterfind("channel/item"):
        stamp = item.find("pubDate")
        late = minutes.get(page_url(item.findtext("link") or "", base))
        if stamp is not None and late:
            when = parsedate_to_datetime(stamp.text) + timedelta(minutes=late)
            stamp.text = format_datetime(when)
    return unparse(before, rss, after)


def stagger_json(feed: dict, minutes: dict[str, int], base: str) -> dict:
    for item in feed.get("items", []):
        late = minutes.get(page_url(item.get("url", ""), base))
        for key in ("date_published", "date_modified"):
            if late and item.get(key):
                when = datetime.fromisoformat(item[key]) + timedelta(minutes=late)
                item[key] = when.isoformat()
    return feed


def series_json(whole: dict, series: str, title: str, self_url: str) -> dict:
    return {
        **whole,
        "title": title,
        "feed_url": self_url,
        "items": [i for i in whole["items"] if series in (i.get("tags") or [])],
    }


def series_feeds(config) -> list[tuple[str, str, str]]:
    """(series, RSS path, JSON path) for every series, paths relative to the site."""
    allowed = config.plugins["material/blog"].config.categories_allowed
    return [
        (s, f"{FEEDS_DIR}/{series_slug(s, config)}.xml",
         f"{FEEDS_DIR}/{series_slug(s, config)}.json")
        for s in allowed
    ]  # fmt: skip


def on_post_build(config):
    site = Path(config.site_dir)
    base = config.site_url.rstrip("/") + "/"
    minutes = minutes_into_day(_notes)
    for name in ("feed_rss_created.xml", "feed_rss_updated.xml"):
        path = site / name
        text = stagger_rss(path.read_text(encoding="utf-8"), minutes, base)
        path.write_text(settle(text), encoding="utf-8")
    for name in ("feed_json_updated.json", "feed_json_created.json"):
        json_file = site / name
        whole_json = json.loads(json_file.read_text(encoding="utf-8"))
        stagger_json(whole_json, minutes, base)
        if not whole_json.get("icon"):
            whole_json.pop("icon", None)
        if config.site_author:
            whole_json["authors"] = [{"name": config.site_author}]
        json_file.write_text(
            json.dumps(whole_json, indent=4, ensure_ascii=False), encoding="utf-8"
        )
    rss_file = site / "feed_rss_created.xml"
    whole_rss = rss_file.read_text(encoding="utf-8")
    (site / FEEDS_DIR).mkdir(exist_ok=True)
    for series, rss_path, json_path in series_feeds(config):
        title = f"{config.site_name}: {series}"
        rss = settle(series_rss(whole_rss, series, title, base + rss_path))
        rss = rss.replace('href="rss.xsl"', 'href="../rss.xsl"', 1)
        (site / rss_path).write_text(rss, encoding="utf-8")
        feed = series_json(whole_json, series, title, base + json_path)
        (site / json_path).write_text(
            json.dumps(feed, indent=4, ensure_ascii=False), encoding="utf-8"
        )
