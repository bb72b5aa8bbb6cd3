"""The formulas against the papers' own statements and worked numbers (the dry runs
are held to them in test_pipeline_schedules)."""

from __future__ import annotations

from fractions import Fraction

import pytest

from snippets.core.runtime import UsageError
from snippets.parallel.pipeline.pipeline_formulas import (
    bubble_formula,
    bubble_of_ideal,
    peak_formula,
)


def test_bubbles_of_total_time() -> None:
    assert bubble_formula("gpipe", 4, 8) == Fraction(3, 11)  # (p-1)/(m+p-1)
    assert bubble_formula("1f1b", 4, 8) == bubble_formula("gpipe", 4, 8)
    assert bubble_formula("interleaved", 4, 8, 2) == Fraction(3, 19)  # (p-1)/(vm+p-1)
    assert bubble_formula("zb-h1", 4, 8) == Fraction(3, 27)  # (p-1)/(3m+p-1)
    assert bubble_formula("zb-h1", 4, 2) == 1 - Fraction(6, 11)  # 2m + 2p - 1 = 11
    assert bubble_formula("gpipe", 1, 5) == 0


def test_megatron_convention_divides_by_the_ideal_time() -> None:
    # Narayanan et al. 2021 §2.2: (p - 1)/m, and (1/v)(p - 1)/m interleaved
    assert bubble_of_ideal("1f1b", 4, 8) == Fraction(3, 8)
    assert bubble_of_ideal("interleaved", 4, 8, 2) == Fraction(3, 16)
    # ZB-H1: idle (p-1)(F + B - W) = p - 1 over the work 3m
    assert bubble_of_ideal("zb-h1", 4, 8) == Fraction(3, 24)


def test_peaks() -> None:
    assert peak_formula("gpipe", 3, 5) == [5, 5, 5]
    assert peak_formula("1f1b", 4, 8) == [4, 3, 2, 1]
    assert peak_formula("1f1b", 4, 2) == [2, 2, 2, 1]
    # Megatron rank 0: 2(p-1) + (v-1)p + 1 = 6 + 4 + 1 chunk-micro-batches
    assert peak_formula("interleaved", 4, 8, 2)[0] == 11
    assert peak_formula("zb-h1", 4, 8) == [4] * 4


def test_bad_input_is_a_usage_error() -> None:
    with pytest.raises(UsageError):
        bubble_formula("zb-h2", 2, 4)
    with pytest.raises(UsageError):
        peak_formula("interleaved", 3, 4, 2)
