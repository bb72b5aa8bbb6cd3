"""A note includes a named part of a result, never a line range of printed output:
reordering a snippet's prints must not silently change a page."""

from __future__ import annotations

import re
from pathlib import Path

DOCS = Path(__file__).resolve().parents[2] / "docs"
RANGE = re.compile(r"""--8<--\s+["']?(results/[^"'\s:]+):[-\d]""")


# Not yet a named part: each of these snippets is to return its excerpt (as ddp does,
# "excerpts": {"summary": ...}) and its note to include that. The list only shrinks.
NOT_YET = {
    "results/allreduce_bench.md",
    "results/attention_bench.md",
    "results/collectives.md",
    "results/context_parallel.md",
    "results/cost_model.md",
    "results/mixed_precision.md",
    "results/model_viewer.md",
    "results/naive_allreduce.md",
    "results/p2p_bandwidth.md",
    "results/pipeline_explorer.md",
    "results/pipeline_timeline.md",
    "results/process_groups.md",
    "results/sequence_parallel.md",
    "results/tiny_gpt.md",
    "results/topology.md",
    "results/tp_gpt.md",
}


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
    found = {k: v for k, v in found.items() if set(v) - NOT_YET}
    assert not found, found
