"""``python -m snippets bench tp``: one tiny run, where both sides compute the same
output and gradients (DTensor's is the oracle), its printed lines, and bad input (one
line, exit status 2). The timing itself is tested in tests/core/test_timing.py; times
on a shared machine are not a pass/fail."""

from __future__ import annotations

import json

import pytest
from conftest import refused

from snippets.core.cli import bench_program
from snippets.parallel.tensor import tp_bench
from snippets.tools import registry


def test_it_is_the_registered_bench_called_tp() -> None:
    assert "snippets.parallel.tensor.tp_bench" in registry.module_names()
    assert tp_bench.BENCH == "tp" and callable(tp_bench.main)


def test_one_json_record_and_both_sides_compute_the_same(capfd) -> None:
    assert bench_program(tp_bench, tp_bench.BENCH, ["--rounds", "3", "--json"]) == 0
    (line,) = capfd.readouterr().out.splitlines()
    r = json.loads(line)
    assert (r["impl"], r["baseline"], r["world_size"]) == ("tp_mlp", "dtensor", 2)
    assert r["max_abs_diff"] < 1e-5, r  # output, ∂x and every weight gradient
    # the two warm-up steps (the first is the check) are not among the 3 timed
    assert len(r["times_s"]) == len(r["baseline_times_s"]) == r["rounds"] == 3
    assert r["tokens"] == tp_bench.ROWS * tp_bench.CFG.block_size
    shown = tp_bench.lines(r)
    assert max(map(len, shown)) <= 88 and "× the time of DTensor's" in " ".join(shown)


@pytest.mark.parametrize(
    "args,named",
    [
        (["--rounds", "0"], "--rounds"),
        (["--rounds", "1.5"], "--rounds"),
        (["-n", "0"], "-n"),
        (["--timeout", "-1"], "--timeout"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args, named, capfd) -> None:
    assert named in refused(["bench", "tp", *args], capfd)


@pytest.mark.parametrize("door", [["bench", "tp"], ["run", "tp_bench"]])
def test_a_size_that_does_not_split_is_refused_before_any_rank_starts(
    door, capfd
) -> None:
    said = refused([*door, "-n", "3", "--rounds", "1"], capfd, nothing_on_stdout=True)
    assert "not divisible by the tensor-parallel size 3" in said
