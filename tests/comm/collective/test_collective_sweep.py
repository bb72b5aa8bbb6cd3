"""Tests for snippets.comm.collective.collective_sweep: a wrong algorithm is caught,
records follow nccl-tests' definitions, and a row fits 88 columns."""

from __future__ import annotations

import pytest
import torch.distributed as dist

from snippets.comm.algorithms import allreduce
from snippets.comm.collective import collective_sweep as cs
from snippets.core.runtime import launch
from snippets.sizing.cost_formulas import Machine


def _do_nothing(tensor, op=None, group=None) -> None:  # forgets to communicate
    pass


def _on_ranks() -> dict:
    out = {}
    try:
        cs.check("all_reduce", "do_nothing", _do_nothing, 1001, dist.get_world_size())
        out["caught"] = False
    except AssertionError as exc:
        out["caught"] = "disagrees" in str(exc)
    machine = {"toy": Machine(1e-4, 1e-9, 1e-10)}
    # 7 elements per rank: the odd size is cut to what divides among 3 ranks
    out["records"] = cs.sweep("reduce_scatter", [3 * 4 * 7 + 4], ["ring"], 1, machine)
    out["records"] += cs.sweep("all_reduce", [4096], ["tree"], 1, machine)
    return out


def test_wrong_algorithm_is_caught_and_records_are_nccl_tests():
    out = launch(_on_ranks, 3, backend="gloo", timeout_s=120)
    assert all(r["caught"] for r in out)
    rs, tree = out[0]["records"]
    assert rs["size_bytes"] == 3 * 4 * 7 and tree["size_bytes"] == 4096
    assert rs["busbw"] == pytest.approx(rs["size_bytes"] / rs["time_s"] * 2 / 3)
    assert tree["busbw"] == pytest.approx(4096 / tree["time_s"] * 2 * 2 / 3)
    # "ours ÷ built-in" reads as busbw: ours' busbw ÷ the built-in's, one round
    for r in (rs, tree):
        assert r["speedup"] == pytest.approx(r["busbw"] / r["baseline_busbw"])
        assert r["predicted_toy_s"] > 1e-4  # the model's α alone is 1e-4 s


def test_the_algorithms_are_allreduce_s_own():
    assert set(cs.algorithms("all_reduce")) == set(allreduce.ALGORITHMS)
    assert set(cs.algorithms("all_gather")) == {"ring"}


def test_a_row_fits_the_page():
    worst = {
        "collective": "reduce_scatter",
        "size_bytes": 1 << 30,
        "algorithm": "halving_doubling",
        "time_s": 99.999,  # 100 s a call: the widest time a row holds
        "busbw": 123.4e9,
        "speedup": 12.34,
        "speedup_lo": 10.12,
        "speedup_hi": 99.99,
    }
    assert len(cs.HEADER) <= 88 and len(cs.format_row(worst)) <= 88
