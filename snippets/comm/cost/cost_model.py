"""Latency matters: α, β and γ measured on this machine, and what they predict.

Fit α and β to a ping-pong between two ranks (``snippets.comm.ping_pong``), γ to a local
add, and the closed forms of ``snippets.sizing.cost_formulas`` predict every
all-reduce algorithm on every size, and where one overtakes another.

    python -m snippets run cost_model                     # 2 local ranks, gloo on a CPU
    torchrun --nproc-per-node 2 -m snippets.comm.cost.cost_model
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import torch
import torch.distributed as dist

from snippets.comm.algorithms.allreduce_claims import model_claims
from snippets.comm.ping_pong import ping_pong_rounds
from snippets.core.charts import Note, line_chart
from snippets.core.claims import Observation, check
from snippets.core.cli import main_entry
from snippets.core.measure import time_it
from snippets.core.parts import Excerpt
from snippets.core.runtime import Spec, device, print0
from snippets.sizing.cost_formulas import (
    FORMULAS,
    Machine,
    crossover,
    predict,
    ring_cost,
    ring_latency_bound_below,
    size_text,
)

SPEC = Spec(
    timed=True,  # it measures time: run-all runs it alone
    summary="α-β(-γ) costs of all-reduce algorithms, α and β fitted on this machine",
    world_size=2,
    min_world_size=2,
)
PATTERNS = ("ping_pong", "ring")


# --8<-- [start:fit]
def fit_line(sizes: Sequence[float], seconds: Sequence[float]) -> tuple[float, float]:
    """Least squares for t = c0 + c1·m, each point weighted by 1/t: the relative error
    counts, so a 10 µs start-up is not drowned by the 10 ms of a large message."""
    m, t = np.asarray(sizes, dtype=np.float64), np.asarray(seconds, dtype=np.float64)
    if m.ndim != 1 or m.shape != t.shape or len(set(m.tolist())) < 2:
        raise ValueError(
            "fit_line needs two or more points at different sizes, as equal 1-D lists"
        )
    if np.any(t <= 0) or np.any(m < 0):
        raise ValueError("fit_line needs positive times and non-negative sizes")
    design = np.stack([np.ones_like(m), m], axis=1) / t[:, None]  # (points, 2)
    (c0, c1), *_ = np.linalg.lstsq(design, np.ones_like(t), rcond=None)
    return float(c0), float(c1)


# --8<-- [end:fit]


# --8<-- [start:measure]
def reduce_time(sizes: Sequence[int], iters: int = 9) -> list[float]:
    """Seconds to add m bytes of float32 into another buffer on this rank (m·γ)."""
    dev, out = device(), []
    for size in sizes:
        a = torch.zeros(max(1, size // 4), device=dev)  # (m/4,) float32
        b = torch.zeros_like(a)
        out.append(time_it(lambda: a.add_(b), iters=iters, device=dev, group=None))
    return out


def ring_exchange(
    sizes: Sequence[int], iters: int = 9, group: dist.ProcessGroup | None = None
) -> list[float]:
    """Seconds for one ring step: every rank sends m bytes to its right and receives m
    from its left, all at once. Unlike a ping-pong, every rank is busy, as in a real
    collective."""
    ranks, dev = dist.get_process_group_ranks(group or dist.group.WORLD), device()
    rank, p = dist.get_rank(group), len(ranks)
    out = []
    for size in sizes:
        send_buf = torch.empty(size, dtype=torch.uint8, device=dev)  # (m,)
        recv_buf = torch.empty_like(send_buf)

        def once() -> None:
            works = [
                dist.isend(send_buf, ranks[(rank + 1) % p], group),
                dist.irecv(recv_buf, ranks[(rank - 1) % p], group),
            ]
            for w in works:
                w.wait()

        out.append(time_it(once, iters=iters, device=dev, group=group))
    return out


def measure_machine(
    sizes: Sequence[int] | None = None,
    group: dist.ProcessGroup | None = None,
    pattern: str = "ping_pong",
) -> tuple[Machine, dict]:
    """Fit α, β to a sweep of ``pattern`` ("ping_pong" between ranks 0 and 1, or
    "ring": all ranks at once) and γ to a local-add sweep; also return the samples."""
    if pattern not in PATTERNS:
        raise ValueError(f"unknown pattern {pattern!r}: use 'ping_pong' or 'ring'")
    sizes = list(sizes or [2**e for e in range(3, 25, 2)])  # 8 B … 8 MiB
    samples: dict = {"sizes": sizes}
    if pattern == "ping_pong":
        rounds = ping_pong_rounds(sizes, 0, 1, iters=15, group=group)
        t_net = [float(np.median(r)) for r in rounds]
        samples["ping_pong_rounds_s"] = rounds  # every round: the spread
    else:
        t_net = ring_exchange(sizes, group=group)
    t_add = reduce_time(sizes)
    alpha, beta = fit_line(sizes, t_net)
    _, gamma = fit_line(sizes, t_add)
    samples |= {f"{pattern}_s": t_net, "reduce_s": t_add}
    return Machine(alpha, beta, max(gamma, 0.0)), samples


# --8<-- [end:measure]


TERMS = [
    Observation(
        says={
            "both": "α is {small_share:.0%} of α + mβ at {small}, mβ {large_share:.0%} "
            "at {large}: α decides small messages, β large ones",
            "not": "α is {small_share:.0%} of α + mβ at {small}, mβ {large_share:.0%} "
            "at {large}: on this run's fit one term decides at both ends",
        },
        judge=lambda f: (
            "both" if f["small_share"] > 0.5 and f["large_share"] > 0.5 else "not"
        ),
        cases={
            "both": {
                "small": "8 B",
                "large": "8 MiB",
                "small_share": 0.99,
                "large_share": 0.9,
            },
            "not": {
                "small": "8 B",
                "large": "8 MiB",
                "small_share": 0.2,
                "large_share": 0.9,
            },
        },  # fmt: skip
    )
]


def terms_point(m: Machine, sizes: Sequence[int]) -> str:
    """The note's point on the two terms, said from this run's fit: which term decides
    at each end is what this machine measured, and the sentence says so either way."""
    small, large = min(sizes), max(sizes)
    facts = {
        "small": size_text(small),
        "large": size_text(large),
        "small_share": m.alpha / (m.alpha + small * m.beta),
        "large_share": large * m.beta / (m.alpha + large * m.beta),
    }
    return check(TERMS, facts)[0]


def latency_tables(m: Machine) -> tuple[list[dict], list[dict]]:
    """Where the ring is latency-bound, for growing p; where it overtakes the others."""
    ring_rows, cross_rows = [], []
    for p in (2, 4, 8, 16, 64, 256, 1024):
        ring = ring_cost(p)
        latency = ring.alpha * m.alpha  # 2(p-1)α
        ring_rows.append(
            {
                "p": p,
                "ring's 2(p-1)α (ms)": latency * 1e3,
                "latency-bound below": size_text(ring_latency_bound_below(p, m)),
                "latency share at 1 MiB": f"{latency / ring.time(2**20, m):.0%}",
            }
        )
    for p in (4, 6, 8, 16, 64, 256, 1024):
        row: dict = {"p": p}
        for other in ("naive_everyone", "double_tree", "halving_doubling"):
            n_x = crossover("ring", other, p, m)
            ring_first = predict("ring", p, 4, m) < predict(other, p, 4, m)
            small, big = ("ring", other) if ring_first else (other, "ring")
            cell = f"{small} always" if n_x is None else f"{big} above {size_text(n_x)}"
            row[f"ring vs {other}"] = cell
        cross_rows.append(row)
    return ring_rows, cross_rows


def charts(m: Machine, sizes: list[int], t_net: list[float], p_show: int) -> dict:
    fit = "α + mβ (fit)"
    # where the two terms are equal, α = mβ: below it a message is mostly start-up
    even = m.alpha / m.beta if m.alpha > 0 and m.beta > 0 else 0.0
    shown = sizes[0] <= even <= sizes[-1]
    # sampled as the predictions are; the chart draws it only where it was measured
    line = sorted({*(2.0**e for e in range(3, 29)), *([even] if shown else [])})
    pingpong = line_chart(
        {
            "measured ping-pong": list(zip(sizes, t_net)),
            fit: [(s, m.alpha + s * m.beta) for s in line],
        },
        title="Ping-pong between two ranks: half the round trip",
        x_label="message size m (bytes)",
        y_label="seconds",
        log_x=True,
        log_y=True,
        x_unit="B",
        y_unit="s",
        model_of={fit: "measured ping-pong"},
        note=Note(f"α = mβ at {size_text(even)}", fit, even) if shown else None,
        description="Half a ping-pong round trip against message size, measured "
        "(points) and the fitted line α + mβ (dashed), both axes logarithmic.",
    )
    # the ring's 2(p-1)α equals its bytes' time here: the table's "latency-bound below"
    curve = [2.0**e for e in range(3, 29)]
    bound = ring_latency_bound_below(p_show, m)
    shown = curve[0] <= bound <= curve[-1]
    curve = sorted({*curve, *([bound] if shown else [])})
    predicted = line_chart(
        {name: [(s, predict(name, p_show, s, m)) for s in curve] for name in FORMULAS},
        title=f"Predicted all-reduce on {p_show} ranks with this machine's α, β, γ",
        x_label="buffer size n (bytes)",
        y_label="seconds",
        log_x=True,
        log_y=True,
        x_unit="B",
        y_unit="s",
        note=Note(f"ring latency-bound below {size_text(bound)}", "ring", bound)
        if shown
        else None,
        description=f"The α-β-γ model's time for each all-reduce algorithm on {p_show} "
        "ranks against buffer size, from the constants fitted in this run.",
    )
    return {"pingpong_plot": pingpong, "predicted_plot": predicted}


def main() -> dict:
    m, raw = measure_machine()
    sizes, t_net = raw["sizes"], raw["ping_pong_s"]
    predicted = [m.alpha + s * m.beta for s in sizes]
    errors = [abs(p - t) / t for p, t in zip(predicted, t_net)]
    median_error = sorted(errors)[len(errors) // 2]
    # the oracle is the measurement: the line must explain the samples it came from
    checked = model_claims(m, sizes, raw["ping_pong_rounds_s"])
    terms = terms_point(m, sizes)
    said = Excerpt()  # what the note shows: the fit, and how well it explains
    said(
        f"α = {m.alpha * 1e6:.1f} µs   β = {m.beta * 1e9:.3f} ns/B "
        f"({1 / m.beta / 1e9:.2f} GB/s)   γ = {m.gamma * 1e9:.3f} ns/B "
        f"({1 / max(m.gamma, 1e-30) / 1e9:.2f} GB/s of adds)"
    )
    said(f"fit: median error {median_error:.0%} over {len(sizes)} ping-pong sizes;")
    said(f"     {checked[1]}")
    said(f"     {terms}")
    ping = [
        {"m": size_text(s), "measured (µs)": t * 1e6, "α + mβ (µs)": f * 1e6}
        | {"error": f"{e:.0%}"}
        for s, t, f, e in zip(sizes, t_net, predicted, errors)
    ]
    ring_rows, cross_rows = latency_tables(m)
    for row in ring_rows:
        p, ms, below, share = row.values()
        print0(
            f"  p={p:>4}: ring latency {ms:>8.3g} ms, latency-bound below "
            f"{below:>9}, {share:>4} of 1 MiB"
        )
    return {
        "alpha_s": m.alpha,
        "beta_s_per_byte": m.beta,
        "gamma_s_per_byte": m.gamma,
        **raw,
        "excerpts": {"fit": said.lines},
        "tables": {
            "pingpong": ping,
            "ring_latency": ring_rows,
            "crossover": cross_rows,
        },
        "figures": charts(m, sizes, t_net, p_show=64),
    }


if __name__ == "__main__":
    raise SystemExit(main_entry(main, SPEC))
