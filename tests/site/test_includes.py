"""A note includes a named part of a result, never a line range of printed output:
reordering a snippet's prints must not silently change a page."""

from __future__ import annotations

import re
from pathlib import Path

DOCS = Path(__file__).resolve().parents[2] / "docs"
RANGE = re.compile(r"""--8<--\s+["']?(results/[^"'\s:]+):[-\d]""")


def line_ranges(text: str) -> list[str]:
    return RANGE.findall(text)


def test_the_pattern_sees_a_line_range() -> None:
    assert line_ranges('--8<-- "results/ddp.md:1:2,-6:-4"') == ["results/ddp.md"]
    assert line_ranges("--8<-- 'results/x.md:3'") == ["results/x.md"]
    assert not line_ranges('--8<-- "results/ddp.summary.md"')
    assert not line_ranges('--8<-- "snippets/comm/x.py:section"')


def test_no_note_includes_lines_of_a_result() -> None:
    found = {
        str(p.relative_to(DOCS)): line_ranges(p.read_text(encoding="utf-8"))
        for p in sorted(DOCS.rglob("*.md"))
    }
    found = {k: v for k, v in found.items() if v}
    count = sum(map(len, found.values()))
    assert not found, f"{count} line-range includes: {found}"
