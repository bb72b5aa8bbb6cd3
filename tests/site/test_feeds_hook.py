"""hooks/feeds.py on a small feed, read back by feedparser: a series' feed holds its
items and no other, names and links itself, is dated by its newest item, and keeps
the stylesheet instruction and the escaping that XML needs."""

from __future__ import annotations

import feedparser
from conftest import load_hook

feeds = load_hook("feeds")

PROLOG = (
    '<?xml version="1.0" encoding="UTF-8" ?>\n'
    '<?xml-stylesheet type="text/xsl" href="rss.xsl"?>'
)
WHOLE = (
    PROLOG
    + """<rss version="2.0" xmlns:atom="http://www.w3.org/2005/Atom">
  <channel>
    <title>Site</title>
    <atom:link href="https://x.org/feed_rss_created.xml" rel="self" />
    <managingEditor>The authors</managingEditor>
    <pubDate>Mon, 01 Jan 2024 00:00:00 +0000</pubDate>
    <lastBuildDate>Thu, 01 Feb 2024 00:00:00 +0000</lastBuildDate>
    <image><url>None</url><title>Site</title></image>
    <item><title>A &lt;b&gt;</title><category>Q &amp; A</category>
      <pubDate>Tue, 02 Jan 2024 00:00:00 +0000</pubDate></item>
    <item><title>B</title><category>Other</category><category>Q</category>
      <pubDate>Wed, 10 Jan 2024 00:00:00 +0000</pubDate></item>
    <item><title>C</title><category>x</category><category> Q &amp; A </category>
      <pubDate>Fri, 05 Jan 2024 00:00:00 +0000</pubDate></item>
  </channel>
</rss>
"""
)


def test_a_series_feed_holds_its_items_and_names_itself() -> None:
    url = "https://x.org/feeds/q-a.xml"
    text = feeds.settle(feeds.series_rss(WHOLE, "Q & A", "Site: Q & A", url))
    assert text.startswith(PROLOG) and text.endswith("</rss>\n")
    feed = feedparser.parse(text)
    assert not feed.bozo, feed.get("bozo_exception")
    assert [e.title for e in feed.entries] == ["A <b>", "C"]
    assert feed.feed.title == "Site: Q & A"
    assert [link.href for link in feed.feed.links if link.rel == "self"] == [url]
    assert feed.feed.published_parsed[:3] == (2024, 1, 5)  # C, the newest kept
    assert feed.feed.updated_parsed[:3] == (2024, 1, 5)
    assert feed.feed.author == "The authors" and "image" not in feed.feed


def test_the_whole_feed_keeps_every_item_and_an_email_editor() -> None:
    whole = WHOLE.replace("The authors", "team@x.org")
    feed = feedparser.parse(feeds.settle(whole))
    assert [e.title for e in feed.entries] == ["A <b>", "B", "C"]
    assert feed.feed.published_parsed[:3] == (2024, 1, 10)
    assert "<managingEditor>team@x.org</managingEditor>" in feeds.settle(whole)
