"""``python -m snippets bench tp``: one tiny run's JSON record (its fields, ratio =
ours ÷ DTensor's, both sides computing the same output and gradients), its printed
lines, and bad input (one line, exit status 2). No timing assertions."""

from __future__ import annotations

import json

import pytest

from snippets.core import registry
from snippets.parallel.tensor import tp_bench

KEYS = {
    "impl", "baseline", "world_size", "step_time_s", "step_time_lo_s",
    "step_time_hi_s", "torch_step_time_s", "torch_step_time_lo_s",
    "torch_step_time_hi_s", "ratio", "ratio_median", "ratio_lo", "ratio_hi",
    "order", "cpu_s", "torch_cpu_s", "cpu_ratio", "repeats", "steps",
    "max_abs_diff", "target", "tokens", "d",
}  # fmt: skip


def test_it_is_the_registered_bench_called_tp() -> None:
    assert "snippets.parallel.tensor.tp_bench" in registry.module_names()
    assert tp_bench.BENCH == "tp" and callable(tp_bench.bench)


def test_one_json_record_and_both_sides_compute_the_same(capsys) -> None:
    assert tp_bench.bench(["--steps", "2", "--repeats", "2", "--json"]) == 0
    (line,) = capsys.readouterr().out.splitlines()
    r = json.loads(line)
    assert set(r) == KEYS, set(r) ^ KEYS
    assert (r["impl"], r["baseline"], r["world_size"]) == ("tp_mlp", "dtensor", 2)
    assert r["ratio"] == r["step_time_s"] / r["torch_step_time_s"]
    assert r["ratio_lo"] <= r["ratio_median"] <= r["ratio_hi"]
    assert r["step_time_lo_s"] <= r["step_time_s"] <= r["step_time_hi_s"]
    assert r["cpu_ratio"] == r["cpu_s"] / r["torch_cpu_s"]
    assert r["steps"] == 4 and r["repeats"] == 2 and r["target"] == 1.0
    assert r["max_abs_diff"] < 1e-5, r  # output, ∂x and every weight gradient
    assert r["order"] in ("faster", "slower", "not separated by the spread")
    shown = tp_bench.lines(r)
    assert max(map(len, shown)) <= 88 and "× the time of DTensor's" in " ".join(shown)


@pytest.mark.parametrize(
    "args,named",
    [
        (["--steps", "0"], "--steps"),
        (["--repeats", "1.5"], "--repeats"),
        (["-n", "0"], "-n"),
        (["--timeout", "-1"], "--timeout"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args, named, capsys) -> None:
    with pytest.raises(SystemExit) as exit_:
        tp_bench.bench(args)
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and err.count("\n") == 1 and named in err, err


def test_a_size_that_does_not_split_is_one_line_and_exit_2(capsys) -> None:
    assert tp_bench.bench(["-n", "3", "--steps", "1", "--repeats", "1"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not divisible by the tensor-parallel size 3" in err
