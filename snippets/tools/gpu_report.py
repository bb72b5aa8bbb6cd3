"""The report ``make gpu-check`` writes: pytest's junit XML and the attention
benchmark's JSON lines read back, and rendered as short Markdown for a note.

A step here is a dict: ``name``, ``status`` (passed, failed, timed out, not run),
``seconds`` and ``output`` (what it printed).
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

TFLOPS_STEP = "attention TFLOP/s"


def parse_junit(path: Path) -> dict:
    """pytest's junit XML → counts and the skipped and failed tests with reasons."""
    tests = {"passed": 0, "failed": 0, "skipped": 0, "skips": [], "failures": []}
    if not path.is_file():
        return tests
    for case in ET.parse(path).getroot().iter("testcase"):
        test = f"{case.get('classname', '')}::{case.get('name', '')}"
        outcome = next(
            (c for c in case if c.tag in ("failure", "error", "skipped")), None
        )
        if outcome is None:
            tests["passed"] += 1
        elif outcome.tag == "skipped":
            tests["skipped"] += 1
            tests["skips"].append({"test": test, "reason": outcome.get("message", "")})
        else:
            tests["failed"] += 1
            tests["failures"].append({"test": test, "why": outcome.get("message", "")})
    return tests


def parse_tflops(output: str) -> list[dict]:
    """The benchmark's JSON lines (one record per implementation, N and causal)."""
    records = []
    for line in output.splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and {"impl", "seq_len", "tflops"} <= set(record):
            records.append(record)
    return records


def tflops_rows(records: list[dict]) -> list[dict]:
    """One row per (causal, N): each implementation's TFLOP/s (SDPA last), then ours ÷
    SDPA's, marked where the two spreads overlap (no ranking there)."""
    seen = dict.fromkeys(r["impl"] for r in records)  # in the benchmark's order
    impls = sorted(seen, key=lambda name: name == "sdpa")
    cells: dict[tuple, dict] = {}
    for r in records:
        row = cells.setdefault((bool(r.get("causal")), r["seq_len"]), {})
        row[r["impl"]] = f"{r['tflops']:.1f}"
        if r["impl"] != "sdpa" and "vs_sdpa" in r:
            overlap = " (overlap)" if r.get("separated") is False else ""
            row[f"{r['impl']} ÷ sdpa"] = f"{r['vs_sdpa']:.2f}{overlap}"
    columns = impls + [f"{name} ÷ sdpa" for name in impls if name != "sdpa"]
    return [
        {"causal": causal, "N": n, **{c: row.get(c, "") for c in columns}}
        for (causal, n), row in sorted(cells.items())
    ]


def markdown_table(rows: list[dict]) -> list[str]:
    cols = list(dict.fromkeys(k for row in rows for k in row))
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    return lines + [
        "| " + " | ".join(str(r.get(c, "")) for c in cols) + " |" for r in rows
    ]


def _last_lines(output: str, n: int) -> list[str]:
    return [line[:86] for line in output.strip().splitlines()[-n:]]


def roof_lines(roof: dict | None, published: dict) -> list[str]:
    """The roofline run's measured ceilings beside the vendor's, where it ran."""
    if not roof:
        return ["", "Roofline: no result (the roofline snippet did not run)."]
    return [
        "",
        f"Roofline, measured: best matmul {roof['peak_matmul_flops'] / 1e12:.0f} "
        f"TFLOP/s ({roof['peak_dtype']} {roof['peak_shape']}), copy "
        f"{roof['bandwidth_bytes_per_s'] / 1e12:.2f} TB/s (read + written); knee "
        f"{roof['knee_flop_per_byte']:.0f} FLOP/byte.",
        "Published by NVIDIA (not measured): "
        + "; ".join(
            f"{name} {v['peak_flops'] / 1e12:.0f} TFLOP/s bf16 dense, "
            f"{v['bandwidth'] / 1e12:.2f} TB/s"
            for name, v in published.items()
        )
        + ".",
    ]


def report(
    env: dict,
    steps: list[dict],
    tests: dict,
    rows: list[dict],
    roof: dict | None = None,
    published: dict | None = None,
) -> str:
    """The Markdown report: machine, steps, test counts, skips, TFLOP/s, roofline."""
    out = ["## GPU check", "", f"{env['gpu']} · {env['cpu']} · driver {env['driver']}"]
    out += [
        f"torch {env['torch']} · CUDA {env['cuda']} · Triton {env['triton']} · "
        f"Python {env['python']} · commit {env['commit']} · "
        + env["utc"].replace("T", " ").replace("Z", " UTC"),
        "",
    ]
    if env.get("missing"):
        out += [f"Not installed here: {', '.join(env['missing'])}.", ""]
    out += markdown_table(
        [
            {
                "step": s["name"],
                "what": s.get("what", ""),
                "status": s["status"],
                "seconds": f"{s['seconds']:.1f}",
            }
            for s in steps
        ]
    )
    out += [
        "",
        f"Tests marked gpu: {tests['passed']} passed, {tests['failed']} failed, "
        f"{tests['skipped']} skipped.",
    ]
    if tests["failures"]:
        out += ["", "Failed:", ""]
        out += [f"- `{t['test']}`: {t['why'][:200]}" for t in tests["failures"]]
    if tests["skips"]:
        out += ["", "Skipped, with the reason:", ""]
        out += [f"- `{t['test']}`: {t['reason']}" for t in tests["skips"]]
    out += ["", "Forward TFLOP/s against SDPA's flash backend (bf16):", ""]
    if rows:
        out += markdown_table(rows)
    else:
        bench = next((s for s in steps if s["name"] == TFLOPS_STEP), None)
        last = _last_lines(bench["output"], 1) if bench else []
        why = f"{bench['status']}: {''.join(last)}" if bench else "not run"
        out.append(f"No TFLOP/s: the benchmark gave no records ({why}).")
    if published is not None:
        out += roof_lines(roof, published)
    for s in steps:
        if s["status"] != "passed":
            out += ["", f"{s['name']}, {s['status']}; its last lines:", "", "```text"]
            out += _last_lines(s["output"], 6) + ["```"]
    return "\n".join(out) + "\n"
