"""``python -m snippets bench pipeline``: one tiny run's two JSON records (our 1F1B
step beside torch's Schedule1F1B, both computing the same loss and gradients; the
executed bubble beside the formula's), its printed lines, and bad input (one line,
exit status 2). The timing itself is tested in tests/core/test_timing.py; times on a
shared machine are not a pass/fail."""

from __future__ import annotations

import json
from fractions import Fraction

import pytest
from conftest import refused

from snippets.core.claims import LawBroken
from snippets.core.cli import bench_program
from snippets.parallel.pipeline import pipeline_bench
from snippets.tools import registry


def test_it_is_the_registered_bench_called_pipeline() -> None:
    assert "snippets.parallel.pipeline.pipeline_bench" in registry.module_names()
    assert pipeline_bench.BENCH == "pipeline" and callable(pipeline_bench.main)


def test_two_json_records_and_both_sides_compute_the_same(capfd) -> None:
    args = ["-n", "2", "--m", "2", "--rounds", "2", "--repeats", "2", "--json"]
    assert bench_program(pipeline_bench, pipeline_bench.BENCH, args) == 0
    step, bubble = map(json.loads, capfd.readouterr().out.splitlines())
    assert (step["impl"], step["baseline"], step["world_size"]) == (
        "1f1b", "torch_1f1b", 2,
    )  # fmt: skip
    assert step["max_abs_diff"] < 1e-5, step  # the loss and every gradient
    # the check step and one warm-up step are not among the 2 timed
    assert len(step["times_s"]) == len(step["baseline_times_s"]) == step["rounds"] == 2
    # the bubble: p = 2, m = 2, so (p - 1)/(m + p - 1) = 1/3
    assert bubble["bubble_formula"] == float(Fraction(1, 3))
    assert 0 < bubble["bubble"] < 1 and 0 <= bubble["bubble_replayed"] < 1
    assert bubble["repeats"] == 2
    shown = pipeline_bench.lines([step, bubble])
    assert max(map(len, shown)) <= 88
    assert "× the time of torch's Schedule1F1B" in " ".join(shown)


@pytest.mark.parametrize(
    "args,named",
    [
        (["--m", "0"], "--m"),
        (["--rounds", "two"], "--rounds"),
        (["--repeats", "0"], "--repeats"),
        (["-n", "-2"], "-n"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args, named, capfd) -> None:
    assert named in refused(["bench", "pipeline", *args], capfd)


@pytest.mark.parametrize("door", [["bench", "pipeline"], ["run", "pipeline_bench"]])
@pytest.mark.parametrize(
    "args,said",
    [(["-n", "1"], "at least 2"), (["-n", "4", "--m", "3"], "needs m >= p=4")],
)
def test_what_cannot_run_is_refused_before_any_rank_starts(
    door, args, said, capfd
) -> None:
    assert said in refused([*door, *args], capfd, nothing_on_stdout=True)


def bubble_record(f_ms: float, b_ms: float) -> dict:
    """A made-up bubble record at p = 2, m = 4: formula 1/5; the plan at F, B too."""
    return {
        "world_size": 2, "m": 4, "bubble": 0.25, "bubble_formula": 0.2,
        "bubble_replayed": 0.21, "ratios": [1.1, 1.25, 1.3], "f_ms": f_ms,
        "b_ms": b_ms, "plan_at": 0.2, "action_ms": [20.0, 10.0, 30.0],
    }  # fmt: skip


def test_the_bubble_sentence_says_what_the_record_shows() -> None:
    text = pipeline_bench.bubble_sentence(bubble_record(10.0, 20.0))
    assert "was 0.250 of the time; the formula (p−1)/(m+p−1) says 0.200" in text
    assert "1.25 [1.18–1.27] (median [IQR] of 3 runs); above the formula" in text
    assert "+0.010 is in the compute" in text and "+0.040 in the messages" in text
    low = bubble_record(10.0, 20.0) | {"bubble": 0.2, "bubble_replayed": 0.2004}
    low |= {"ratios": [0.9, 1.0, 1.05]}  # -0.0004: "0.000", never "-0.000"
    assert "0.000 in the messages" in pipeline_bench.bubble_sentence(low)
    assert "not separated: the IQR reaches 1" in pipeline_bench.bubble_sentence(low)


def test_a_b_no_longer_than_an_f_is_said_and_a_broken_plan_fails() -> None:
    said = pipeline_bench.bubble_point(bubble_record(10.0, 20.0))
    assert said[0].startswith("A B took longer than an F (20.0 against 10.0 ms)")
    # an observation: the other outcome is said, never a failed run
    said = pipeline_bench.bubble_point(bubble_record(20.0, 10.0))
    assert said[0].startswith("On this run a B took no longer than an F (10.0")
    # a law: a plan that no longer leaves the formula's bubble fails the run
    with pytest.raises(LawBroken, match="0.250 against 0.200"):
        pipeline_bench.bubble_point(bubble_record(10.0, 20.0) | {"plan_at": 0.25})
