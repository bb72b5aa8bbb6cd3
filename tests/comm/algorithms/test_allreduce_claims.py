"""Tests for snippets.comm.algorithms.allreduce_claims: the note's fixed sentences pass
on data of the recorded shape and fail on a contradicting one; the rendered sentences
rank only what the spread separates."""

from __future__ import annotations

import json

import pytest

from snippets.comm.algorithms import allreduce_claims as ac
from snippets.core.claims import LawBroken
from snippets.sizing.cost_formulas import Machine, predict

M = Machine(alpha=100e-6, beta=0.5e-9, gamma=0.05e-9)
SIZES = [2**e for e in range(3, 25, 2)]


def rounds_around(m: Machine, wobble: float) -> list[list[float]]:
    """Five rounds per size, spread ±wobble around the line α + mβ."""
    line = [m.alpha + s * m.beta for s in SIZES]
    return [[t * (1 + wobble * k) for k in (-2, -1, 0, 1, 2)] for t in line]


def test_model_claims_hold_on_a_line_inside_the_noise():
    said = ac.model_claims(M, SIZES, rounds_around(M, 0.05))
    assert said[1] == (
        "α + mβ is within the rounds' range at 11 of 11 sizes (their IQR: 11), "
        "a majority"
    )


def test_a_line_that_misses_the_rounds_is_said_not_failed():
    # every round twice as slow as the fitted line, however noisy: the fit is off
    far = [[2.0 * t for t in r] for r in rounds_around(M, 0.1)]
    said = ac.model_claims(M, SIZES, far)
    assert said[1].startswith("α + mβ is within the rounds' range at only 0 of 11")
    said = ac.model_claims(Machine(-1e-6, M.beta), SIZES, rounds_around(M, 0.05))
    assert said[0].startswith("the fit gave α = -1e-06 s")


def test_a_model_that_breaks_its_law_fails_the_run(monkeypatch):
    real = ac.predict  # halving/doubling made to lose to the ring at p = 4

    def doctored(name, p, n, m):
        return real(name, p, n, m) * (3 if name == "halving_doubling" else 1)

    monkeypatch.setattr(ac, "predict", doctored)
    with pytest.raises(LawBroken, match="never loses to the ring"):
        ac.model_claims(M, SIZES, rounds_around(M, 0.05))


def test_the_recorded_cost_model_run_is_said_either_way(results_dir):
    value = json.loads((results_dir / "cost_model.json").read_text())["result"]
    m = Machine(value["alpha_s"], value["beta_s_per_byte"], value["gamma_s_per_byte"])
    sizes, rounds = value["sizes"], value["ping_pong_rounds_s"]
    assert len(ac.model_claims(m, sizes, rounds)) == 4
    far = ac.model_claims(m, sizes, [[10 * t for t in r] for r in rounds])
    assert "on this run the line misses most of them" in far[1]


def record(name, size, ratio, lo, hi, *, cpu=1e-3, builtin=None) -> dict:
    """A sweep record (``snippets.core.timing``'s format) with a given speed-up."""
    builtin = builtin or [2e-3] * 4
    return {
        "algorithm": name,
        "size_bytes": size,
        "world_size": 4,
        "speedup": ratio,  # the built-in's time ÷ ours
        "speedup_lo": lo,
        "speedup_hi": hi,
        "time_s": 2e-3 / ratio,
        "baseline_time_s": sorted(builtin)[len(builtin) // 2],
        "baseline_times_s": builtin,
        "cpu_s": cpu,
        "baseline_cpu_s": 1e-3,
        "predicted_ping_pong_s": 1e-3,
        "predicted_ring_s": 3e-3,
    }


MACHINES = {"ping_pong": Machine(1e-4, 1e-9), "ring": Machine(3e-4, 4e-9)}


def test_findings_rank_only_what_the_spread_separates():
    rows = [
        record("ring", 4096, 1.5, 1.2, 1.8),  # faster than the built-in
        record("halving_doubling", 4096, 0.5, 0.4, 0.7, cpu=3e-3),  # slower
        record("tree", 4096, 1.1, 0.9, 1.3),  # its IQR holds 1: not separated
    ]
    text = ac.findings(rows, MACHINES, [])
    assert "α is 3× the idle fit's, its β 4×" in text
    assert "faster than the built-in beyond the spread: ring; slower: " in text
    assert "slower: halving_doubling; not separated: 1 of 3" in text
    assert "4 KiB slower (CPU per call 3×)" in text
    # measured 2 ms ÷ ratio: ring 1.33, tree 1.82, halving_doubling 4 ms. The idle
    # fit's 1 ms is under all three; the busy fit's 3 ms is over two, named
    assert "idle fit predicts less than was measured for 3 of 3 points;" in text
    assert "busy fit predicts less than was measured for 1 of 3" in text
    assert "(not for ring at 4 KiB, tree at 4 KiB)" in text
    # a contradicting run: halving/doubling now ahead of the ring, beyond the spread
    rows[1] = record("halving_doubling", 4096, 2.5, 2.2, 2.9, cpu=0.5e-3)
    flipped = ac.findings(rows, MACHINES, [])
    assert "4 KiB faster (CPU per call 0.5×)" in flipped
    assert "faster than the built-in beyond the spread: ring, halving_doubling" in (
        flipped
    )


def test_the_baseline_is_questioned_only_when_it_mostly_waits():
    waiting = [record("ring", 4096, 1.0, 0.9, 1.1, builtin=[5e-3, 6e-3, 7e-3, 8e-3])]
    said = ac.findings(waiting, MACHINES, [])
    assert "wall time is 6.5× at 4 KiB its CPU per call: most of such" in said
    busy = [record("ring", 4096, 1.0, 0.9, 1.1, builtin=[1.0e-3, 1.2e-3, 1.4e-3])]
    assert "waiting" not in ac.findings(busy, MACHINES, [])
    row = ac.builtin_row(waiting, MACHINES["ping_pong"])
    assert row["built-in (ms)"] == "6.500 [5.750–7.250]"  # inclusive quartiles
    assert row["idle fit's ring (ms)"] == pytest.approx(
        predict("ring", 4, 4096, MACHINES["ping_pong"]) * 1e3
    )


def fits_of(own_off: float, sweep_off: float) -> list[dict]:
    """Both fits of M: their own points measured own_off above α + mβ, the sweep's
    all-reduces sweep_off above what each fit predicts."""
    line = [M.alpha + s * M.beta for s in SIZES]
    samples = {
        p: {"sizes": SIZES, f"{p}_s": [t * (1 + own_off) for t in line]}
        for p in ac.FITS
    }
    records = [
        {f"predicted_{p}_s": t for p in ac.FITS} | {"time_s": t * (1 + sweep_off)}
        for t in (1e-3, 2e-3, 5e-3)
    ]
    return ac.fit_errors({p: M for p in ac.FITS}, samples, records)


def test_each_fit_is_said_to_predict_the_all_reduces_as_the_numbers_show():
    worse = ac.fits_said(fits_of(own_off=0.25, sweep_off=1.0))  # 20% and 50%
    assert worse[0].startswith(
        "The idle fit predicts the all-reduces less well than it fits the ping-pong"
    )
    assert "(median error 50% against 20%)" in worse[0]
    better = ac.fits_said(fits_of(own_off=0.25, sweep_off=0.1))  # 20% and 9%
    assert all("as well as or better than" in line for line in better)
    assert ac.fit_row(fits_of(0.25, 1.0)[1])["median error, the all-reduces"] == "50%"
