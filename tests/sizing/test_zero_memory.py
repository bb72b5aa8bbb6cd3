"""ZeRO memory formulas against the paper's worked numbers (arXiv:1910.02054)."""

from __future__ import annotations

import pytest

from snippets.sizing import zero_memory as zm


def test_paper_figure_1_breakdown() -> None:
    psi, N = 7.5e9, 64
    p, g, K = zm.PRECISIONS["mixed Adam"]
    s0 = zm.model_state_bytes(0, psi, N, p, g, K)
    assert (s0["parameters"], s0["gradients"], s0["optimizer"]) == (15e9, 15e9, 90e9)
    gb = [zm.model_state_bytes(s, psi, N, p, g, K)["total"] / 1e9 for s in range(4)]
    assert gb == pytest.approx([120, 31.40625, 16.640625, 1.875])


def test_one_rank_shards_nothing_and_fp32_adam_is_16_bytes() -> None:
    p, g, K = zm.PRECISIONS["fp32 Adam"]
    for s in range(4):
        assert zm.model_state_bytes(s, 10, 1, p, g, K)["total"] == 160
    # stage 2, N = 4, Ψ = 100: 4·100 + (4 + 8)·100/4
    assert zm.model_state_bytes(2, 100, 4, p, g, K)["total"] == 700
    assert zm.formula_table(100, "mixed Adam", ranks=[1, 4])[1] == {
        "N": 4,
        "stage 0": 1600,
        "stage 1": 700,
        "stage 2": 550,
        "stage 3": 400,
    }


def test_sharded_bytes_with_exact_shard_equals_the_formula() -> None:
    # Ψ = 12 on N = 3: each rank's shard is exactly 4 values
    for s in range(4):
        assert zm.sharded_bytes(s, 12, 4, 2, 2, 12) == zm.model_state_bytes(
            s, 12, 3, 2, 2, 12
        )
    assert zm.sharded_bytes(3, 10, 4, 2, 2, 12)["total"] == 16 * 4  # padded 10/3


def test_communication_is_2psi_then_3psi() -> None:
    assert [zm.comm_values(s, 5) for s in range(4)] == [10, 10, 10, 15]
