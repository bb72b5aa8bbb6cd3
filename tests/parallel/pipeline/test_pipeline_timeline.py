"""The snippet end to end on 2 ranks, its bubble arithmetic on stamps made up by
hand, and bad input from the command line: one line, exit 2."""

from __future__ import annotations

import json

import pytest
from conftest import refused

from snippets.core.charts import validate
from snippets.core.cli import OneLineParser
from snippets.core.runtime import launch
from snippets.parallel.pipeline import pipeline_timeline as pt
from snippets.parallel.pipeline.pipeline_schedules import schedule

# gpipe, p = 2, m = 1, in ns: rank 0 F 0..1, B 3..5; rank 1 F 1..2, B 2..3
STAMPS = [
    [{"kind": "F", "microbatch": 0, "chunk": 0, "wait": 0, "start": 0, "end": 1},
     {"kind": "B", "microbatch": 0, "chunk": 0, "wait": 1, "start": 3, "end": 5}],
    [{"kind": "F", "microbatch": 0, "chunk": 0, "wait": 0, "start": 1, "end": 2},
     {"kind": "B", "microbatch": 0, "chunk": 0, "wait": 2, "start": 2, "end": 3}],
]  # fmt: skip


def test_bubbles_from_stamps() -> None:
    assert pt.executed_bubble(STAMPS) == pytest.approx(1 - 5 / 10)
    # replayed with the same times and instant messages: rank 0's B starts at 3 too
    assert pt.replayed_bubble(schedule("gpipe", 2, 1), STAMPS, 1) == pytest.approx(0.5)


def test_the_note_marks_the_longest_wait_where_it_ended() -> None:
    spans, _ = pt.spans_and_trace(STAMPS)  # rank 0 waits 2 ns for B0; rank 1, 1 ns
    note = pt.longest_wait(spans)
    assert (note.on, note.x, note.text) == ("rank 0", 3e-6, "rank 0 idle 2 ns")
    assert any(s["lane"] == note.on and s["start"] == note.x for s in spans)
    late = [
        s | {"start": s["start"] + 4.5, "end": s["end"] + 4.5}
        if s["lane"] == "rank 1"
        else s
        for s in spans
    ]  # rank 1 first starts 4.5 ms late
    assert pt.longest_wait(late).text == "rank 1 idle 4.5 ms"
    busy = [{"lane": "rank 0", "label": "F0", "start": 0.0, "end": 1.0}]
    assert pt.longest_wait(busy) is None


def test_spans_and_trace() -> None:
    spans, trace = pt.spans_and_trace(STAMPS)
    assert [(s["lane"], s["label"]) for s in spans][:2] == [("rank 0", "F0")] * 1 + [
        ("rank 0", "B0")
    ]
    compute = [e for e in trace["traceEvents"] if e["ph"] == "X" and e["tid"] == 0]
    assert sorted((e["pid"], e["ts"], e["dur"]) for e in compute) == [
        (0, 0.0, 0.001), (0, 0.003, 0.002), (1, 0.001, 0.001), (1, 0.002, 0.001)
    ]  # fmt: skip
    json.dumps(trace)


def test_the_snippet_on_two_ranks(tmp_path) -> None:
    result = launch(pt.main, 2, "gloo", 60, args=(2, 2, 1, str(tmp_path)))[0]
    rows = result["tables"]["schedules"]
    assert [r["schedule"] for r in rows] == ["gpipe", "1f1b", "interleaved (v=2)",
                                             "zb-h1"]  # fmt: skip
    for r in rows:
        assert r["formula"] == r["dry_run"] and r["max_error"] < 1e-12
        assert r["peak_plan"] == r["peak_autograd"]
        assert 0 <= r["replay"] < 1 and 0 <= r["executed"] < 1
    for spec in result["figures"].values():
        validate(spec)
    written = json.loads((tmp_path / "pipeline_zb-h1.json").read_text())
    assert written == result["chrome_traces"]["zb-h1"]


def test_the_parser_refuses_zero_micro_batches(capfd) -> None:
    parser = OneLineParser(prog="pipeline_timeline")
    pt.add_arguments(parser)
    refused(["--m", "0"], capfd, entry=parser.parse_args)


def test_m_not_a_multiple_of_p_is_one_line_and_exit_2(capfd) -> None:
    argv = ["-n", "2", "--m", "3"]  # interleaved needs groups of p = 2
    assert "multiple of 2" in refused(["run", "pipeline_timeline", *argv], capfd)


def made_up(f_ms: float, b_ms: float, w_ms: float, executed, replayed) -> dict:
    """Runs of ZB-H1 and 1F1B with the given bubbles; ZB-H1's stamps take the given
    times per kind on both ranks (only their lengths matter here)."""
    kinds = {"F": f_ms, "B": b_ms, "W": w_ms}
    stamps = [
        [{"kind": k, "start": 0, "end": int(t * 1e6)} for k, t in kinds.items()]
        for _ in range(2)
    ]
    runs = {"executed": executed, "replayed": replayed, "stamps": [stamps] * 3}
    return {"zb-h1": runs, "1f1b": {**runs, "stamps": []}}


def test_zb_h1_gap_renders_what_the_runs_show() -> None:
    found = made_up(10.0, 10.0, 2.0, [0.30, 0.25, 0.35], [0.20, 0.21, 0.19])
    text = pt.zb_h1_gap(pt.gap_facts(found, 2, 4))
    assert "W 2.0 ms: a W was 0.20 of an F" in text
    assert "leaves more idle than its formula (0.077)" in text
    assert "1F1B's formula" in text
    # median executed 0.30, median replay 0.20, formula 1/13
    assert f"into +{0.20 - 1 / 13:.3f} in the compute" in text
    assert "and +0.100 in the messages" in text
    assert "ZB-H1's is not separated by the spread" in text  # the same runs


def test_a_w_as_long_as_an_f_is_said_as_the_run_found_it() -> None:
    # with F = B = W the plan's bubble is exactly the formula's: nothing to explain
    found = made_up(10.0, 10.0, 10.0, [0.30, 0.25, 0.35], [0.20, 0.21, 0.19])
    text = pt.zb_h1_gap(pt.gap_facts(found, 2, 4))
    assert "in this run the plan at these times leaves no more idle" in text


def test_the_gap_between_execution_and_replay_reads_without_minus_zero() -> None:
    found = made_up(10.0, 10.0, 2.0, [0.30, 0.2099, 0.35], [0.20, 0.21, 0.19])
    assert pt.gap_facts(found, 2, 4)["gaps"] == "0.000 to +0.160"
