"""gpu_report: junit XML, benchmark JSON lines and Markdown, checked by hand."""

from __future__ import annotations

import json
from pathlib import Path

from snippets.tools import gpu_report

# One case of each outcome; <error> (a broken fixture) counts as a failure too.
JUNIT = """<?xml version="1.0"?>
<testsuites><testsuite name="pytest">
<testcase classname="t.a" name="ok"/>
<testcase classname="t.a" name="err"><error message="fixture broke"/></testcase>
<testcase classname="t.b" name="bad"><failure message="1 != 2"/></testcase>
<testcase classname="t.b" name="skip"><skipped message="needs 2 GPUs"/></testcase>
</testsuite></testsuites>
"""


def test_junit_error_counts_as_failure(tmp_path: Path) -> None:
    (tmp_path / "j.xml").write_text(JUNIT)
    tests = gpu_report.parse_junit(tmp_path / "j.xml")
    assert (tests["passed"], tests["failed"], tests["skipped"]) == (1, 2, 1)
    assert tests["failures"] == [
        {"test": "t.a::err", "why": "fixture broke"},
        {"test": "t.b::bad", "why": "1 != 2"},
    ]
    assert tests["skips"] == [{"test": "t.b::skip", "reason": "needs 2 GPUs"}]


def test_tflops_keeps_only_complete_records() -> None:
    good = {"impl": "sdpa", "seq_len": 512, "tflops": 9.5}
    lines = [
        "warming up",
        json.dumps(good),
        json.dumps({"impl": "x", "seq_len": 1}),  # no tflops
        json.dumps([1, 2, 3]),  # not a dict
        "{broken",
    ]
    assert gpu_report.parse_tflops("\n".join(lines)) == [good]


def test_rows_sorted_by_causal_then_length_with_sdpa_last() -> None:
    records = [
        {"impl": "sdpa", "seq_len": 2048, "tflops": 200.0, "causal": True},
        {"impl": "ours", "seq_len": 2048, "tflops": 150.0, "causal": True,
         "vs_sdpa": 0.75},
        {"impl": "sdpa", "seq_len": 1024, "tflops": 100.0},
        {"impl": "ours", "seq_len": 1024, "tflops": 50.0, "vs_sdpa": 0.5,
         "separated": True},
    ]  # fmt: skip
    rows = gpu_report.tflops_rows(records)
    assert rows == [
        {"causal": False, "N": 1024, "ours": "50.0", "sdpa": "100.0",
         "ours ÷ sdpa": "0.50"},
        {"causal": True, "N": 2048, "ours": "150.0", "sdpa": "200.0",
         "ours ÷ sdpa": "0.75"},
    ]  # fmt: skip
    assert list(rows[0]) == ["causal", "N", "ours", "sdpa", "ours ÷ sdpa"]


def test_markdown_table_by_hand() -> None:
    rows = [{"a": 1, "b": "x"}, {"a": 2, "c": True}]
    assert gpu_report.markdown_table(rows) == [
        "| a | b | c |",
        "|---|---|---|",
        "| 1 | x |  |",
        "| 2 |  | True |",
    ]


def test_the_roofline_lines_keep_measured_and_published_apart() -> None:
    from snippets.tools.gpu_report import roof_lines

    roof = {"peak_matmul_flops": 7.5e14, "peak_dtype": "bf16",
            "peak_shape": "8192×8192×8192", "bandwidth_bytes_per_s": 4.3e12,
            "knee_flop_per_byte": 7.5e14 / 4.3e12}  # fmt: skip
    published = {"H200 SXM (NVIDIA)": {"peak_flops": 989e12, "bandwidth": 4.8e12}}
    _, measured, vendor = roof_lines(roof, published)
    assert "750 TFLOP/s (bf16 8192×8192×8192)" in measured and "4.30 TB/s" in measured
    assert "knee 174 FLOP/byte" in measured
    assert vendor.startswith("Published by NVIDIA (not measured): H200 SXM (NVIDIA)")
    assert "989 TFLOP/s" in vendor and "4.80 TB/s" in vendor
    assert "no result" in roof_lines(None, published)[1]
