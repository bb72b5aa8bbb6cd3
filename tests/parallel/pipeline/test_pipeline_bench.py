"""``python -m snippets bench pipeline``: one tiny run's two JSON records (our 1F1B
step ÷ torch's Schedule1F1B, both computing the same loss and gradients; the
executed bubble ÷ the formula), its printed lines, and bad input (one line, exit
status 2). No timing assertions."""

from __future__ import annotations

import json
from fractions import Fraction

import pytest

from snippets.core import registry
from snippets.parallel.pipeline import pipeline_bench

COMMON = {"impl", "baseline", "world_size", "step_time_s", "torch_step_time_s",
          "ratio", "ratio_median", "ratio_lo", "ratio_hi", "repeats", "target",
          "m", "d", "rows"}  # fmt: skip
STEP = COMMON | {"step_time_lo_s", "step_time_hi_s", "torch_step_time_lo_s",
                 "torch_step_time_hi_s", "order", "cpu_s", "torch_cpu_s",
                 "cpu_ratio", "steps", "max_abs_diff"}  # fmt: skip
BUBBLE = COMMON | {"bubble", "bubble_formula", "bubble_replayed", "action_ms"}


def test_it_is_the_registered_bench_called_pipeline() -> None:
    assert "snippets.parallel.pipeline.pipeline_bench" in registry.module_names()
    assert pipeline_bench.BENCH == "pipeline" and callable(pipeline_bench.bench)


def test_two_json_records_and_both_sides_compute_the_same(capsys) -> None:
    args = ["-n", "2", "--m", "2", "--steps", "1", "--repeats", "2", "--json"]
    assert pipeline_bench.bench(args) == 0
    step, bubble = map(json.loads, capsys.readouterr().out.splitlines())
    assert set(step) == STEP, set(step) ^ STEP
    assert set(bubble) == BUBBLE, set(bubble) ^ BUBBLE
    assert (step["impl"], step["baseline"], step["world_size"]) == (
        "1f1b", "torch_1f1b", 2,
    )  # fmt: skip
    assert step["ratio"] == step["step_time_s"] / step["torch_step_time_s"]
    assert step["ratio_lo"] <= step["ratio_median"] <= step["ratio_hi"]
    assert step["max_abs_diff"] < 1e-5, step  # the loss and every gradient
    assert step["steps"] == 2 and step["target"] == 1.1
    # the bubble: p = 2, m = 2, so (p - 1)/(m + p - 1) = 1/3
    assert bubble["bubble_formula"] == float(Fraction(1, 3))
    assert bubble["ratio"] == bubble["bubble"] / bubble["bubble_formula"]
    assert 0 < bubble["bubble"] < 1 and 0 <= bubble["bubble_replayed"] < 1
    assert bubble["torch_step_time_s"] is None and bubble["step_time_s"] > 0
    mid, lo, hi = bubble["action_ms"]  # median, quartiles
    assert 0 < lo <= mid <= hi
    shown = pipeline_bench.lines([step, bubble])
    assert max(map(len, shown)) <= 88
    assert "× the time of torch's Schedule1F1B" in " ".join(shown)


@pytest.mark.parametrize(
    "args,named",
    [
        (["--m", "0"], "--m"),
        (["--steps", "two"], "--steps"),
        (["--repeats", "0"], "--repeats"),
        (["-n", "-2"], "-n"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args, named, capsys) -> None:
    with pytest.raises(SystemExit) as exit_:
        pipeline_bench.bench(args)
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and err.count("\n") == 1 and named in err, err


@pytest.mark.parametrize(
    "args,said",
    [(["-n", "1"], "at least 2 ranks"), (["-n", "4", "--m", "3"], "needs m >= p=4")],
)
def test_what_cannot_run_is_one_line_and_exit_2(args, said, capsys) -> None:
    assert pipeline_bench.bench(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and said in err, err
