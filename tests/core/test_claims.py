"""Tests for snippets.core.claims: the spread, the ranking rule, and a claim that fails
the run when the data contradict it."""

from __future__ import annotations

import statistics

import pytest

from snippets.core import claims as c


@pytest.mark.parametrize(
    "values", [[3.0], [1.0, 2.0], [5.0, 1.0, 4.0, 2.0, 3.0], [0.5, 9.0, 1.0, 1.1]]
)
def test_spread_is_median_and_quartiles(values):
    s = c.Spread.of(values)
    assert s.median == statistics.median(values)
    assert min(values) <= s.lo <= s.median <= s.hi <= max(values)
    if len(values) == 5:  # inclusive quartiles of 1..5, worked by hand: 2 and 4
        assert (s.lo, s.hi) == (2.0, 4.0)
    assert c.Spread(1.234, 1.0, 1.5).text() == "1.23 [1.00–1.50]"
    assert c.Spread(0.002, 0.001, 0.003).text(1, 1e3) == "2.0 [1.0–3.0]"


def test_empty_sample_is_refused():
    with pytest.raises(ValueError):
        c.Spread.of([])


def test_ranked_only_where_the_iqrs_do_not_overlap():
    quick, slow = [1.0, 1.1, 1.2, 1.3, 1.4], [2.0, 2.1, 2.2, 2.3, 2.4]
    assert c.compare(quick, slow) == c.FASTER
    assert c.compare(slow, quick) == c.SLOWER
    # medians 1.2 and 1.3, but the ranges overlap: no ranking
    wide = [0.2, 1.0, 1.3, 1.6, 3.0]
    assert c.compare(quick, wide) == c.TIED == c.compare(wide, quick)
    # touching is not separated: a.hi == b.lo
    assert c.order(c.Spread(1, 0, 2), c.Spread(3, 2, 4)) == 0
    assert c.order(c.Spread(1, 0, 1.9), c.Spread(3, 2, 4)) == -1


def test_a_ratio_against_one():
    assert c.verdict(c.Spread(1.5, 1.2, 1.8)) == c.FASTER  # theirs ÷ ours > 1
    assert c.verdict(c.Spread(0.5, 0.4, 0.7)) == c.SLOWER
    assert c.verdict(c.Spread(1.5, 0.9, 1.8)) == c.TIED


def test_a_law_renders_and_a_broken_one_fails_naming_it():
    beats = c.Law("{a} sends {b} bytes", lambda r: r["sent"] == r["b"])
    data = {"a": "ring", "b": 96, "sent": 96}
    assert c.check([beats], data) == ["ring sends 96 bytes"]
    with pytest.raises(c.LawBroken, match="ring sends 96 bytes"):
        c.check([beats], data | {"sent": 97})
    # every broken law is named, not only the first
    other = c.Law("{b} is even", lambda r: r["sent"] % 2 == 0)
    with pytest.raises(c.LawBroken, match="2 law.*sends.*even"):
        c.check([beats, other], data | {"sent": 97})
    c.law(True, "never raised")
    with pytest.raises(c.LawBroken, match="counted 3, expected 4"):
        c.law(3 == 4, "counted 3, expected 4")


FASTER_OR_NOT = c.Observation(
    says={"faster": "{a} beat {b}", "slower": "{b} beat {a}", "tied": "a draw"},
    judge=lambda r: c.compare(r["ta"], r["tb"]).split()[0].replace("not", "tied"),
    cases={
        "faster": {"a": "x", "b": "y", "ta": [1, 1.1], "tb": [2, 2.1]},
        "slower": {"a": "x", "b": "y", "ta": [2, 2.1], "tb": [1, 1.1]},
        "tied": {"a": "x", "b": "y", "ta": [1, 2], "tb": [1.5, 2.5]},
    },
)


def test_an_observation_says_each_outcome_and_never_fails_the_run():
    for outcome, case in FASTER_OR_NOT.cases.items():
        assert FASTER_OR_NOT.outcome(case) == outcome
        said = c.check([FASTER_OR_NOT], case)
        assert said == [FASTER_OR_NOT.says[outcome].format_map(case)]
    assert c.check([FASTER_OR_NOT], FASTER_OR_NOT.cases["slower"]) == ["y beat x"]


def test_an_observation_needs_two_outcomes_each_with_its_case():
    with pytest.raises(ValueError, match="at least two outcomes"):
        c.Observation(says={"a": "a"}, judge=lambda r: "a", cases={"a": {}})
    with pytest.raises(ValueError, match="cases for"):
        c.Observation(says={"a": "a", "b": "b"}, judge=lambda r: "a", cases={"a": {}})
    odd = c.Observation(says={"a": "a", "b": "b"}, judge=lambda r: "c",
                        cases={"a": {}, "b": {}})  # fmt: skip
    with pytest.raises(ValueError, match="outcome 'c' has no sentence"):
        odd.render({})


@pytest.mark.parametrize(
    "ratios, says",
    [([1.2, 1.3, 1.25, 1.4], "up: the whole IQR lies above 1"),
     ([0.7, 0.8, 0.75, 0.9], "down: the whole IQR lies below 1"),
     ([0.9, 1.1, 1.0, 1.3], "not separated: the IQR reaches 1"),
     ([0.9, 1.0, 1.1, 1.2, 1.3], "not separated: the IQR reaches 1")],  # touching
)  # fmt: skip
def test_a_paired_ratio_is_ranked_only_where_its_iqr_is_off_1(ratios, says) -> None:
    line = c.ratio_sentence(ratios, "a ÷ b", "up", "down")
    assert line.startswith(f"a ÷ b: {c.Spread.of(ratios).text()} (median [IQR] of ")
    assert line.endswith(f"{len(ratios)} rounds); {says}.")


@pytest.mark.parametrize(
    "x, digits, text",
    [(0.123, 2, "+0.12"), (-0.123, 2, "-0.12"), (-0.004, 2, "0.00"),
     (0.004, 2, "0.00"), (-0.0, 3, "0.000"), (-0.0004, 3, "0.000"),
     (-0.0006, 3, "-0.001")],
)  # fmt: skip
def test_a_signed_difference_never_reads_minus_zero(x, digits, text) -> None:
    assert c.signed(x, digits) == text
