"""Tests for snippets.comm.cost.cost_model: the fit against synthetic data with known α
and β, the measurement and its report on real ranks (gloo), and the charts' notes at
points the formulas place by hand."""

from __future__ import annotations

import json
import random
import subprocess
import sys

import pytest
import torch
import torch.distributed as dist

from snippets.comm.cost import cost_model as cm
from snippets.comm.ping_pong import ping_pong
from snippets.core import charts
from snippets.core.runtime import launch
from snippets.sizing.cost_formulas import Machine

M = Machine(alpha=30e-6, beta=0.4e-9, gamma=0.05e-9)  # made-up but realistic machine


# --- fitting α and β: synthetic data with a known answer ------------------------------


def test_fit_recovers_alpha_beta_exactly_from_clean_data():
    sizes = [2**e for e in range(3, 25, 2)]
    times = [M.alpha + s * M.beta for s in sizes]
    alpha, beta = cm.fit_line(sizes, times)
    assert alpha == pytest.approx(M.alpha, rel=1e-9) and beta == pytest.approx(
        M.beta, rel=1e-9
    )


def test_fit_recovers_alpha_beta_from_noisy_data():
    rng = random.Random(7)
    sizes = [2**e for e in range(3, 25)] * 3
    times = [(M.alpha + s * M.beta) * (1 + rng.uniform(-0.05, 0.05)) for s in sizes]
    alpha, beta = cm.fit_line(sizes, times)
    assert alpha == pytest.approx(M.alpha, rel=0.05) and beta == pytest.approx(
        M.beta, rel=0.05
    )


def test_fit_weights_small_messages():
    # plain least squares would let the 16 MiB point swamp α; the relative fit keeps it
    sizes = [8, 64, 512, 4096, 16 << 20]
    times = [M.alpha + s * M.beta for s in sizes]
    times[-1] *= 1.02
    alpha, _ = cm.fit_line(sizes, times)
    assert alpha == pytest.approx(M.alpha, rel=0.05)


@pytest.mark.parametrize(
    "sizes,times",
    [([1], [1.0]), ([1, 2], [1.0]), ([4, 4], [1.0, 2.0]), ([1, 2], [1.0, 0.0])],
)
def test_fit_rejects_bad_input(sizes, times):
    with pytest.raises(ValueError):
        cm.fit_line(sizes, times)


# --- the measurement, on real ranks ---------------------------------------------------


def _measure_on_ranks() -> dict:
    sub = dist.new_group(
        [1, 2]
    )  # ping-pong inside a sub-group: ranks 1 and 2, rank 0 outside
    inner = (
        ping_pong([64, 4096], iters=2, group=sub) if dist.get_rank() in (1, 2) else None
    )
    ring = cm.ring_exchange([64, 4096], iters=2)  # all three ranks at once
    result = cm.main()  # whole world of 3: rank 2 only keeps the timer's barriers
    return {"inner": inner, "ring": ring, "result": result}


def test_main_fits_and_reports_on_three_ranks():
    out = launch(_measure_on_ranks, 3, backend="gloo", timeout_s=60)
    assert all(t > 0 for t in out[1]["inner"]) and out[0]["inner"] is None
    assert all(t > 0 for rank in out for t in rank["ring"])
    r = out[0]["result"]
    assert r["alpha_s"] > 0 and r["beta_s_per_byte"] > 0
    assert len(r["ping_pong_s"]) == len(r["sizes"]) and all(
        t > 0 for t in r["ping_pong_s"]
    )
    assert {"pingpong", "ring_latency", "crossover"} <= set(r["tables"])
    for spec in r["figures"].values():
        charts.validate(spec)  # Vega-Lite, with a text alternative
        assert spec["description"]
    # the fit line is drawn in the colour of the points it was fitted to
    scale = r["figures"]["pingpong_plot"]["layer"][0]["encoding"]["color"]["scale"]
    colour = dict(zip(scale["domain"], scale["range"]))
    assert colour["α + mβ (fit)"] == colour["measured ping-pong"]


@pytest.mark.gpu
@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs 2 CUDA GPUs")
def test_main_on_nccl():
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "snippets",
            "run",
            "cost_model",
            "-n",
            "2",
            "--backend",
            "nccl",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "α =" in proc.stdout


def test_bad_pattern_raises():
    with pytest.raises(ValueError, match="unknown pattern"):
        cm.measure_machine(pattern="bogus")


def test_tables_fit_the_page():
    ring_rows, cross_rows = cm.latency_tables(M)
    assert [r["p"] for r in ring_rows] == [2, 4, 8, 16, 64, 256, 1024]
    # the threshold grows linearly with p: n = 2pα/(2β+γ)
    assert ring_rows[0]["latency-bound below"] == cm.size_text(
        2 * 2 * M.alpha / (2 * M.beta + M.gamma)
    )
    for row in cross_rows:
        assert all(len(str(v)) <= 40 for v in row.values())
    assert cross_rows[2]["ring vs halving_doubling"] == "halving_doubling always"


def test_the_terms_point_says_what_the_fit_shows_either_way():
    fit = Machine(alpha=50e-6, beta=1e-9, gamma=0.0)  # 50 µs, 1 GB/s
    said = cm.terms_point(fit, [8, 2**23])
    # 8 B: 50 µs of 50.008 µs; 8 MiB: 8.39 ms of 8.44 ms
    assert said == (
        "α is 100% of α + mβ at 8 B, mβ 99% at 8 MiB: α decides small messages, "
        "β large ones"
    )
    # an observation: a fit that contradicts the point is said, not failed
    slow_start = Machine(alpha=50e-3, beta=1e-9, gamma=0.0)  # 50 ms
    said = cm.terms_point(slow_start, [8, 2**23])
    assert "mβ 14% at 8 MiB: on this run's fit one term decides at both ends" in said
    no_start = Machine(alpha=1e-9, beta=1e-9, gamma=0.0)
    said = cm.terms_point(no_start, [8, 2**23])
    assert said.startswith("α is 11% of α + mβ at 8 B") and "both ends" in said


# --- the charts ---


def _notes(spec: dict) -> list[dict]:
    """The rows of the layers that draw a note, once each."""
    rows = {
        json.dumps(r, sort_keys=True)
        for layer in spec["layer"]
        for r in layer.get("data", {}).get("values", [])
        if "text" in r
    }
    return [json.loads(r) for r in rows]


def _note(spec: dict) -> dict:
    (row,) = _notes(spec)
    return row


def test_the_fit_stops_at_the_data_and_notes_where_alpha_equals_m_beta():
    sizes = [2**e for e in range(3, 24, 2)]  # 8 B … 8 MiB, as measured
    t_net = [M.alpha + s * M.beta for s in sizes]
    figures = cm.charts(M, sizes, t_net, p_show=8)
    rows = figures["pingpong_plot"]["data"]["values"]
    fit = [r["x"] for r in rows if r["series"] == "α + mβ (fit)"]
    assert min(fit) == sizes[0] and max(fit) == sizes[-1]  # not to 256 MiB
    note = _note(figures["pingpong_plot"])
    # α = mβ at m = α/β = 75,000 B, where the time is 2α
    assert note["x"] == pytest.approx(75_000)
    assert note["y"] == pytest.approx(2 * M.alpha)
    assert note["text"] == "α = mβ at 73.2 KiB"


def test_the_prediction_notes_where_the_ring_turns_latency_bound():
    p = 8
    figures = cm.charts(M, [8, 2**23], [1e-5, 1e-2], p_show=p)
    note = _note(figures["predicted_plot"])
    # n = 2pα/(2β+γ): there the ring's 2(p-1)α start-ups equal its bytes' time, so
    # the ring takes twice its start-ups
    assert note["x"] == pytest.approx(2 * p * M.alpha / (2 * M.beta + M.gamma))
    assert note["y"] == pytest.approx(2 * 2 * (p - 1) * M.alpha)
    assert note["series"] == "ring" and note["text"].startswith("ring latency-bound")
    # α/β (75,000 B) outside the measured sizes: no note
    assert not _notes(cm.charts(M, [8, 64], [1e-5, 1e-5], p)["pingpong_plot"])
