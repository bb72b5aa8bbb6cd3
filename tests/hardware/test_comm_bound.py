"""Compute against communication: the roofline and the ring against numbers worked by
hand, the crossover against the closed forms it has where the bandwidth term is
gone, the timed compute against FlopCounterMode and against the tensor-parallel
layers' own gradients, the timed messages against what the layers log, a short run
on a made-up machine, and bad input in one line."""

from __future__ import annotations

import json
import math
from fractions import Fraction

import pytest
import torch
from conftest import refused
from torch.utils.flop_counter import FlopCounterMode

from snippets.core import results
from snippets.core.claims import Spread
from snippets.core.runtime import launch, run
from snippets.hardware import comm_bound as C
from snippets.sizing.cost_formulas import Machine

ROOF = {"peak_matmul_flops": 2.0e11, "bandwidth_bytes_per_s": 4.0e10}
COST = {"alpha_s": 8e-5, "beta_s_per_byte": 2e-10, "gamma_s_per_byte": 3e-11}
FLOPS_ONLY = C.Roof(1.0, math.inf, Machine(0.0, 0.0))  # seconds = FLOPs


def fake_results(folder) -> None:
    folder.mkdir(exist_ok=True)
    for name, value in (("roofline", ROOF), ("cost_model", COST)):
        (folder / f"{name}.json").write_text(json.dumps({"result": value}))


def test_a_matmul_on_its_roof_by_hand() -> None:
    roof = C.Roof(1e9, 1e9, Machine(0.0, 0.0))
    # (1, 1000) @ (1000, 1000): 2 MFLOP is 2 ms, 4.008 MB is 4.008 ms: memory-bound
    assert C.matmul_seconds(1, 1000, 1000, roof) == pytest.approx(3 * 4.008e-3)
    # (1000, 1000) @ (1000, 1000): 2 GFLOP is 2 s, 12 MB is 12 ms: compute-bound
    assert C.matmul_seconds(1000, 1000, 1000, roof) == pytest.approx(3 * 2.0)


@pytest.mark.parametrize("p", [2, 3, 5])
def test_the_gradient_all_reduce_is_the_ring_written_out(p) -> None:
    a, b, g = 1e-4, 2e-10, 3e-11
    roof = C.Roof(1.0, 1.0, Machine(a, b, g))
    n = 4 * 3 * 64 * 64  # fp32 gradients of 3 Linears of width 64
    ring = 2 * (p - 1) * a + 2 * (p - 1) / p * n * b + (p - 1) / p * n * g
    assert C.dp_comm(64, 3, p, roof) == pytest.approx(ring)
    # TP: two all-reduces of (T, h) fp32 activations
    assert C.tp_comm(32, 64, p, roof) == pytest.approx(2 * C.all_reduce_seconds(
        4 * 32 * 64, p, roof))  # fmt: skip


@pytest.mark.parametrize("p", [2, 3])
def test_the_crossovers_against_their_closed_forms(p) -> None:
    """Without the bandwidth term the DP crossover is comm·peak/(6N), and the TP
    one the root of 48T/(t·peak)·h² = 4(t−1)α + 16(t−1)/t·T·β·h."""
    a, b, peak, h, L, T = 1e-4, 2e-10, 5e10, 96, 3, 40
    roof = C.Roof(peak, math.inf, Machine(a, b))
    comm = 2 * (p - 1) * a + 2 * (p - 1) / p * 4 * L * h * h * b
    t_star = C.crossover(lambda x: C.dp_compute(x, h, L, roof),
                         lambda x: C.dp_comm(h, L, p, roof), 1e-3, 1e9)  # fmt: skip
    assert t_star == pytest.approx(comm * peak / (6 * L * h * h), rel=1e-9)
    qa, qb, qc = 48 * T / (p * peak), 16 * (p - 1) / p * T * b, 4 * (p - 1) * a
    root = (qb + math.sqrt(qb * qb + 4 * qa * qc)) / (2 * qa)
    h_star = C.crossover(lambda x: C.tp_compute(T, x, p, roof),
                         lambda x: C.tp_comm(T, x, p, roof), 1e-3, 1e9)  # fmt: skip
    assert h_star == pytest.approx(root, rel=1e-9)


@pytest.mark.parametrize("p", [2, 5])
def test_without_alpha_the_crossovers_are_the_links_flops_a_byte(p) -> None:
    """α = 0: T* = 4(p−1)/(3p)·peak·β′ for any N and h* = (t−1)·peak·β′/3 for any T,
    with β′ = β + γ/2 (a ring sends 2(p−1)/p of the buffer and adds (p−1)/p)."""
    b, g, peak = 2e-10, 3e-11, 5e10
    roof, link = C.Roof(peak, math.inf, Machine(0.0, b, g)), peak * (b + g / 2)
    for h, L in ((64, 1), (300, 7)):
        t_star = C.crossover(lambda x: C.dp_compute(x, h, L, roof),
                             lambda x: C.dp_comm(h, L, p, roof), 1e-3, 1e9)  # fmt: skip
        assert t_star == pytest.approx(4 * (p - 1) / (3 * p) * link, rel=1e-9)
    for T in (3, 1000):
        h_star = C.crossover(lambda x: C.tp_compute(T, x, p, roof),
                             lambda x: C.tp_comm(T, x, p, roof), 1e-3, 1e9)  # fmt: skip
        assert h_star == pytest.approx((p - 1) * link / 3, rel=1e-9)


def test_the_crossover_on_the_roofline_is_where_the_two_are_equal() -> None:
    roof = C.Roof(5e10, 4e10, Machine(1e-4, 2e-10, 3e-11))
    t = C.crossover(lambda x: C.dp_compute(x, 512, 4, roof),
                    lambda x: C.dp_comm(512, 4, 2, roof), 1e-3, 1e9)  # fmt: skip
    assert C.dp_compute(t, 512, 4, roof) == pytest.approx(C.dp_comm(512, 4, 2, roof))
    # below the knee the matmuls are memory-bound: compute is three passes over
    # the weights however few the tokens, so a slow enough link never loses
    fast = C.Roof(5e10, 4e10, Machine(0.0, 1e-12))
    compute = lambda x: C.dp_compute(x, 512, 4, fast)  # noqa: E731
    assert C.crossover(compute, lambda x: C.dp_comm(512, 4, 2, fast), 1e-3, 1e9) is None


@pytest.mark.parametrize(
    "x_star,factor,step,expected",
    [(18.8, 8, 1, [("below", 2), ("above", 150)]),
     (79.4, 8, 2, [("below", 10), ("above", 636)]),
     (79.4, 4, 3, [("below", 21), ("above", 318)]),
     (0.5, 8, 1, [("above", 4)]),  # nothing whole lies below
     (None, 8, 1, [])],
)  # fmt: skip
def test_points_lie_on_each_side(x_star, factor, step, expected) -> None:
    assert C.points(x_star, factor, step) == expected


def test_a_side_only_where_the_spread_lies_there() -> None:
    assert C.side(Spread(2.0, 1.5, 3.0)) == C.COMM_BOUND
    assert C.side(Spread(0.5, 0.4, 0.6)) == C.COMPUTE_BOUND
    assert C.side(Spread(1.3, 0.9, 1.6)) == C.NEITHER


def test_the_dp_compute_is_the_flops_the_model_counts() -> None:
    T, h, L = 7, 24, 3
    fns = C.dp_fns(T, h, L)
    with FlopCounterMode(display=False) as counter:
        fns["compute"]()
    assert counter.get_total_flops() == C.dp_compute(T, h, L, FLOPS_ONLY)
    assert counter.get_total_flops() == 6 * (L * h * h) * T  # 6NT


def tp_rank(T: int, h: int) -> dict:
    t = torch.distributed.get_world_size()
    fns = C.tp_fns(T, h)
    col, row, x, dy = fns["layers"]
    with FlopCounterMode(display=False) as counter:
        fns["compute"]()
    mine = [w.grad.clone() for w in (col.weight, row.weight)]
    for w in (col.weight, row.weight):
        w.grad = None
    log = C.layer_sends(col, row, x, dy)  # the layers, with their f and g
    layers = [w.grad for w in (col.weight, row.weight)]
    return {
        "flops": counter.get_total_flops(), "model": C.tp_compute(T, h, t, FLOPS_ONLY),
        "same_grads": all(torch.equal(a, b) for a, b in zip(mine, layers)),
        "all_reduces": log.count(op="all_reduce"), "calls": len(log.calls),
        "sent": log.sent(), "elements": [c[3] for c in log.calls],
    }  # fmt: skip


def test_the_tp_compute_and_messages_are_the_layers_own() -> None:
    T, h, t = 5, 9, 3  # odd sizes: 4h/t = 12 features a rank
    for got in launch(tp_rank, t, "gloo", 60.0, args=(T, h)):
        assert got["flops"] == got["model"] == 48 * T * h * h // t
        assert got["same_grads"]  # the timed matmuls are the layers' matmuls
        assert got["all_reduces"] == got["calls"] == 2  # g forward, f backward
        assert got["elements"] == [T * h, T * h]
        assert got["sent"] == Fraction(2 * 2 * (t - 1) * T * h, t)


def test_the_roof_is_the_calculators_this_machine_share(tmp_path, monkeypatch):
    fake_results(tmp_path)
    monkeypatch.setenv(results.RESULTS_ENV, str(tmp_path))
    monkeypatch.setattr(C.os, "cpu_count", lambda: 4)
    roof = C.load_roof(2)  # 2 ranks of 2 threads on 4 cores: half the machine each
    assert roof.peak == pytest.approx(1.0e11) and roof.bandwidth == pytest.approx(2e10)
    assert roof.machine == Machine(8e-5, 2e-10, 3e-11)


def test_a_short_run_on_a_made_up_machine(tmp_path, monkeypatch) -> None:
    fake_results(tmp_path)
    monkeypatch.setenv(results.RESULTS_ENV, str(tmp_path))
    out = run(C.main, C.SPEC, options={"rounds": 2, "factor": 2.0, "tokens": 16})
    rows = {(r["strategy"], r["where"]): r for r in out["points"]}
    assert set(rows) == {(s, w) for s in ("DP", "TP") for w in ("below", "above")}
    for (strategy, where), r in rows.items():
        assert (r["x"] < r["x_star"]) == (where == "below")
        assert r["predicted_side"] == (
            C.COMM_BOUND if r["predicted_ratio"] > 1 else C.COMPUTE_BOUND
        )
        assert r["rounds"] == 2 and r["ratio"]["lo"] <= r["ratio"]["hi"]
    assert len(out["tables"]["points"]) == 4
    for name in ("dp", "tp"):
        drawn = {v["series"] for v in out["figures"][name]["data"]["values"]}
        assert any(s.startswith("crossover") for s in drawn)
        assert {"compute, measured", "communication, measured"} <= drawn


@pytest.mark.parametrize(
    "args,words",
    [(["--factor", "1"], "--factor 1 must be above 1"),
     (["--factor", "0"], "--factor: must be greater than 0"),
     (["--rounds", "0"], "--rounds: must be at least 1"),
     (["-n", "1"], "-n must be at least 2"),
     ([], "run 'python -m snippets run roofline' first")],
)  # fmt: skip
def test_bad_input_is_one_line_and_exit_2(args, words, capfd) -> None:
    env = {results.RESULTS_ENV: "/nowhere"}
    assert words in refused(["run", "comm_bound", *args], capfd, env=env)
