"""Step time: the 1F1B bubble of Narayanan et al. 2021 and the overlap rule."""

from __future__ import annotations

import pytest

from snippets.sizing import throughput as tp


def test_bubble_fraction_is_narayanan() -> None:
    # 1F1B: the bubble is (p - 1)/(m + p - 1) of the step; interleaved: the idle
    # time is (p - 1)/(v·m) of the ideal compute (Narayanan et al. 2021 §2.2)
    for p, m in ((4, 8), (8, 8), (2, 1)):
        bubble = tp.bubble_factor(p, m)
        assert 1 - 1 / bubble == pytest.approx((p - 1) / (m + p - 1))
    assert tp.bubble_factor(4, 8, v=2) == pytest.approx(1 + 3 / 16)
    assert tp.bubble_factor(1, 5) == 1


def test_overlap_hides_dp_and_cp_only_up_to_compute() -> None:
    c = tp.compute_seconds(1e15, 1e15, 0.5)  # 2 s
    assert c == 2
    assert tp.step_seconds(c, 1, dp=1, tp=0.5, pp=0.25, cp=0, overlap=0) == 3.75
    assert tp.step_seconds(c, 1, dp=1, tp=0.5, pp=0.25, cp=0, overlap=1) == 2.75
    assert tp.step_seconds(c, 1, dp=5, tp=0, pp=0, cp=1, overlap=1) == 6  # 2 hidden
    assert tp.step_seconds(c, 1.5, dp=0, tp=0, pp=0, cp=0, overlap=0) == 3
    assert tp.tokens_per_second(8, 1024, 2.0) == 4096
