"""What the browser tests share besides their fixtures (those are in
``tests/conftest.py``): where each built page is served, which pages hold charts,
waiting for the charts to draw, and WCAG contrast."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

CHART = '<figure class="cp-chart">'


def url_of(served: str, built_site: Path, html: Path) -> str:
    return served + html.parent.relative_to(built_site).as_posix().strip(".") + "/"


def every_page(built_site: Path) -> list[Path]:
    return sorted(built_site.rglob("index.html"))


def chart_pages(built_site: Path) -> list[Path]:
    found = [
        p for p in every_page(built_site) if CHART in p.read_text(encoding="utf-8")
    ]
    assert found, "no page has a chart"
    return found


def note_url(served: str, built_site: Path, containing: str) -> str:
    for html in sorted((built_site / "blog").glob("20*/**/index.html")):
        if containing in html.read_text(encoding="utf-8"):
            return url_of(served, built_site, html)
    pytest.fail(f"no note contains {containing!r}")


def wait_for_charts(p) -> int:
    count = p.locator("figure.cp-chart").count()
    p.wait_for_function(
        "n => document.querySelectorAll('figure.cp-chart .cp-chart__view svg"
        " .role-mark').length >= n",
        arg=count,
        timeout=20000,
    )
    return count


def luminance(rgb: str) -> float:
    """WCAG 2 relative luminance of a CSS ``rgb(r, g, b)`` colour."""
    channels = [int(c) / 255 for c in re.findall(r"\d+", rgb)[:3]]
    lin = [
        c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in channels
    ]
    return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]


def contrast(a: str, b: str) -> float:
    hi, lo = sorted((luminance(a), luminance(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)
