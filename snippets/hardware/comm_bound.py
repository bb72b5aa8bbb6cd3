"""When a strategy becomes communication-bound: a step's compute against its
communication, on this machine's measured roofline and α-β, and where they cross.

Compute is timed by the roofline: a matmul (T, k) @ (k, n) runs three times a step
(forward, then backward's dX = dY·W and dW = dYᵀ·X), each call 2Tkn FLOPs moving
4(Tk + kn + Tn) bytes, and each call takes the slower of FLOPs ÷ peak and bytes ÷
bandwidth, with a rank's share of the machine (the sizing calculator's
``this-machine`` profile: the roofline note's peak and bandwidth, ``ranks`` ranks on
the machine's cores). Communication is the α-β(-γ) ring of the latency note:
2(t−1)α + 2(t−1)/t·n·β + (t−1)/t·n·γ for n bytes on t ranks.

* Data parallel on p ranks, a model of L square Linear layers of width h without
  bias (N = L·h² parameters, every FLOP a matmul's: 6·N·T a step of T tokens a
  rank). Compute grows with T; the all-reduce of the 4N bytes of gradients does not.
  They cross at T*: below it the step is communication-bound, above it
  compute-bound. Below the roofline's knee the matmuls are memory-bound and compute
  stops shrinking (three passes over the weights), so comm ÷ compute is capped
  there: at most 4N·β' ÷ 12N·(1/bandwidth) plus the α terms.
* Tensor parallel on t ranks, Megatron's MLP: ``ColumnParallelLinear`` h → 4h, then
  ``RowParallelLinear`` 4h → h, T tokens. A rank's two matmuls are 48·T·h²/t FLOPs a
  step; its communication is two all-reduces of the (T, h) activations, g's forward
  and f's backward. Compute grows as h², communication as h (plus 4(t−1)α), so they
  cross at a width h*: narrower is communication-bound.

Then the check: one point below and one above each crossover (``factor`` times
away) runs on the world's ranks. The compute alone and the communication alone are
timed by the one harness (interleaved rounds, the slowest rank's time), and
comm ÷ compute, round by round, is held to the side of 1 the model predicts, where
its IQR lies wholly on one side.

    python -m snippets run comm_bound [--rounds R] [--factor F] [--tokens T]
"""

from __future__ import annotations

import argparse
import math
import os
from dataclasses import dataclass
from fractions import Fraction
from typing import Callable

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

from snippets.core import timing
from snippets.core.charts import line_chart
from snippets.core.claims import FASTER, SLOWER, Spread, law, verdict
from snippets.core.cli import main_entry, positive_float, positive_int
from snippets.core.results import needed
from snippets.core.runtime import Spec, UsageError, print0
from snippets.parallel.tensor.tensor_parallel import (
    ColumnParallelLinear,
    CommLog,
    RowParallelLinear,
)
from snippets.sizing import presets
from snippets.sizing.cost_formulas import Machine, ring_cost

SPEC = Spec(
    summary="compute against communication per step for DP and TP, and the crossover",
    world_size=2,
    min_world_size=2,
    timed=True,  # it measures time: run-all runs nothing beside it
    timeout_s=120.0,
    reads=("roofline", "cost_model"),  # the roof; the all-reduce's α, β, γ
)
WIDTH, LAYERS = 512, 4  # DP's model: N = L·h² ≈ 1M parameters, 4 MiB of gradients
COMM_BOUND, COMPUTE_BOUND, NEITHER = (
    "communication-bound",
    "compute-bound",
    "not separated",
)


# --8<-- [start:model]
@dataclass(frozen=True)
class Roof:
    """One rank's share of this machine, and the α-β(-γ) of one message."""

    peak: float  # FLOP/s
    bandwidth: float  # bytes/s, read + written
    machine: Machine  # α, β, γ


def matmul_seconds(T: int, k: int, n: int, roof: Roof) -> float:
    """(T, k) @ (k, n) forward, dX and dW: three calls of the same FLOPs and bytes,
    each at its roof."""
    flops, moved = 2 * T * k * n, 4 * (T * k + k * n + T * n)  # fp32
    return 3 * max(flops / roof.peak, moved / roof.bandwidth)


def all_reduce_seconds(n_bytes: float, p: int, roof: Roof) -> float:
    return ring_cost(p).time(n_bytes, roof.machine)


def dp_compute(T: float, h: int, L: int, roof: Roof) -> float:
    """A step of T tokens a rank: forward and backward of L (h, h) Linears."""
    return L * matmul_seconds(T, h, h, roof)


def dp_comm(h: int, L: int, p: int, roof: Roof) -> float:
    """One ring all-reduce of the fp32 gradients, 4·L·h² bytes, whatever T is."""
    return all_reduce_seconds(4 * L * h * h, p, roof)


def tp_compute(T: int, h: float, t: int, roof: Roof) -> float:
    """A rank's two matmuls: (T, h) @ (h, 4h/t), then (T, 4h/t) @ (4h/t, h)."""
    return matmul_seconds(T, h, 4 * h / t, roof) + matmul_seconds(T, 4 * h / t, h, roof)


def tp_comm(T: int, h: float, t: int, roof: Roof) -> float:
    """g's all-reduce of the (T, h) output forward, f's of its gradient backward."""
    return 2 * all_reduce_seconds(4 * T * h, t, roof)


def crossover(
    compute: Callable[[float], float], comm: Callable[[float], float],
    lo: float, hi: float,
) -> float | None:  # fmt: skip
    """The x in [lo, hi] where compute(x) = comm(x), by bisection on log x (compute ÷
    comm rises with x); None if one side wins over the whole range."""
    gap = lambda x: math.log(compute(x) / comm(x))  # noqa: E731
    if gap(lo) >= 0 or gap(hi) <= 0:
        return None
    for _ in range(200):
        mid = math.sqrt(lo * hi)
        lo, hi = (mid, hi) if gap(mid) < 0 else (lo, mid)
    return math.sqrt(lo * hi)


# --8<-- [end:model]


def load_roof(ranks: int) -> Roof:
    """The roofline and the cost model from ``results/``, as the calculator's
    this-machine profile shares them out to ``ranks`` ranks."""
    found = needed(*SPEC.reads)
    cost = found["cost_model"]
    gpu = presets.this_machine(
        found["roofline"], cost, ranks, os.cpu_count() or 1, memory_bytes=0
    )
    m = Machine(cost["alpha_s"], cost["beta_s_per_byte"], cost["gamma_s_per_byte"])
    return Roof(gpu["peak_flops"], gpu["hbm_bw"], m)


# --8<-- [start:measure]
def dp_fns(T: int, h: int, L: int, group=None) -> dict[str, Callable[[], None]]:
    """A rank's compute (forward and backward of the L Linears on T tokens, no sync)
    and the all-reduce of a gradient-sized buffer, apart."""
    model = nn.Sequential(*[nn.Linear(h, h, bias=False) for _ in range(L)])
    x = torch.randn(T, h, requires_grad=True)  # (T, h): dX of every layer is needed
    dy = torch.randn(T, h)
    grads = torch.zeros(L * h * h)  # (N,), the gradients as one flat buffer

    def compute() -> None:
        model.zero_grad(set_to_none=True)
        x.grad = None
        model(x).backward(dy)

    return {"compute": compute, "comm": lambda: dist.all_reduce(grads, group=group)}


def tp_fns(T: int, h: int, group=None) -> dict:
    """The matmuls of this rank's slices of a ColumnParallel → RowParallel MLP, and
    the two all-reduces its f and g issue, apart."""
    torch.manual_seed(0)  # the same dense layers on every rank, as from_dense expects
    fc, proj = nn.Linear(h, 4 * h, bias=False), nn.Linear(4 * h, h, bias=False)
    col = ColumnParallelLinear.from_dense(fc, group)  # weight (4h/t, h)
    row = RowParallelLinear.from_dense(proj, group)  # weight (h, 4h/t)
    x = torch.randn(T, h, requires_grad=True)  # (T, h), the same on every rank
    dy = torch.randn(T, h)
    buffers = torch.zeros(2, T, h)  # g's forward sum, f's backward sum

    def compute() -> None:
        for w in (col.weight, row.weight, x):
            w.grad = None
        F.linear(F.linear(x, col.weight), row.weight).backward(dy)  # (T, h)

    def comm() -> None:
        for buffer in buffers:  # (T, h) each
            dist.all_reduce(buffer, group=group)

    return {"compute": compute, "comm": comm, "layers": (col, row, x, dy)}


def layer_sends(col, row, x, dy) -> CommLog:
    """The real layers, forward and backward, with every collective they issue."""
    col.log = row.log = log = CommLog()
    row(col(x)).backward(dy)
    col.log = row.log = None
    return log


def time_point(fns: dict, predicted: dict, rounds: int, group=None) -> dict:
    """Interleaved rounds of compute and comm; back-to-back calls make a sample of
    about 5 ms where one call is predicted shorter."""
    calls = {k: max(1, min(50, math.ceil(5e-3 / predicted[k]))) for k in predicted}
    found = timing.interleave(
        {k: fns[k] for k in ("compute", "comm")}, rounds, warmup=2, calls=calls,
        group=group,
    )  # fmt: skip
    return {"compute_s": found.wall["compute"], "comm_s": found.wall["comm"],
            "compute_cpu_s": found.cpu["compute"],  # its thread's time on a core
            "ratio": found.ratios("comm", "compute"), "calls": calls}  # fmt: skip


# --8<-- [end:measure]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--rounds", type=positive_int, default=9)
    parser.add_argument(
        "--factor", type=positive_float, default=8.0,
        help="each point this many times below or above the crossover",
    )  # fmt: skip
    parser.add_argument(
        "--tokens", type=positive_int, default=256, help="T a rank, for TP"
    )


def side(ratio: Spread) -> str:
    """comm ÷ compute against 1: a side only where the whole IQR lies there."""
    return {FASTER: COMM_BOUND, SLOWER: COMPUTE_BOUND}.get(verdict(ratio), NEITHER)


def points(x_star: float | None, factor: float, step: int = 1) -> list:
    """(where, x): one whole x below the crossover and one above, multiples of
    ``step``; none where there is no crossover."""
    if x_star is None:
        return []
    near = lambda x: step * max(1, round(x / step))  # noqa: E731
    below, above = near(x_star / factor), near(x_star * factor)
    return [("below", below)] * (below < x_star) + [("above", above)]


# --8<-- [start:main]
def main(rounds: int = 9, factor: float = 8.0, tokens: int = 256) -> dict:
    if factor <= 1:
        raise UsageError(f"--factor {factor:g} must be above 1: points at x*/F, x*·F")
    p, load = dist.get_world_size(), [os.getloadavg()[0]]
    roof = load_roof(p)
    h, L, T = WIDTH, LAYERS, tokens
    dp = {"compute": lambda x: dp_compute(x, h, L, roof),
          "comm": lambda x: dp_comm(h, L, p, roof)}  # fmt: skip
    tp = {"compute": lambda x: tp_compute(T, x, p, roof),
          "comm": lambda x: tp_comm(T, x, p, roof)}  # fmt: skip
    t_star = crossover(dp["compute"], dp["comm"], 1e-3, 1e9)  # tokens a rank
    h_star = crossover(tp["compute"], tp["comm"], 1e-3, 1e9)  # width
    rows = []
    for strategy, model, x_star, step in (("DP", dp, t_star, 1),
                                          ("TP", tp, h_star, p)):  # fmt: skip
        for where, x in points(x_star, factor, step):
            fns = dp_fns(x, h, L) if strategy == "DP" else tp_fns(T, x)
            if strategy == "TP":  # what the layers send is what the model counts
                log = layer_sends(*fns["layers"])
                law(log.count(op="all_reduce") == 2, log.calls)
                law(log.sent() == Fraction(4 * (p - 1) * T * x, p), log.calls)
            predicted = {k: f(x) for k, f in model.items()}
            got = time_point(fns, predicted, rounds)
            rows.append(point_row(strategy, where, x, x_star, predicted, got))
    load.append(os.getloadavg()[0])
    said = findings(rows, roof, p, T, t_star, h_star, load)
    for line in said:
        print0(line)
    return {
        "tables": {"points": table(rows)},
        "figures": {"dp": figure("DP", dp, t_star, rows, p, T),
                    "tp": figure("TP", tp, h_star, rows, p, T)},
        "markdown": {"findings": "\n\n".join(said)},
        "points": [{k: jsonable(v) for k, v in r.items()} for r in rows],
        "crossover": {"dp_tokens": t_star, "tp_width": h_star},
        "roof": {"peak": roof.peak, "bandwidth": roof.bandwidth,
                 "alpha": roof.machine.alpha, "beta": roof.machine.beta},
        "provenance": {"backend": dist.get_backend(), "world_size": p},
    }  # fmt: skip


# --8<-- [end:main]


def point_row(
    strategy: str, where: str, x: int, x_star: float, predicted: dict, got: dict
) -> dict:
    ratio = Spread.of(got["ratio"])
    wanted = COMM_BOUND if where == "below" else COMPUTE_BOUND
    of_model = [c / predicted["compute"] for c in got["compute_s"]]
    comm_of_model = [c / predicted["comm"] for c in got["comm_s"]]
    return {
        "strategy": strategy, "where": where, "x": x, "x_star": x_star,
        "predicted_compute_s": predicted["compute"],
        "predicted_comm_s": predicted["comm"],
        "predicted_ratio": predicted["comm"] / predicted["compute"],
        "predicted_side": wanted,
        "compute_s": Spread.of(got["compute_s"]), "comm_s": Spread.of(got["comm_s"]),
        "ratio": ratio, "side": side(ratio),
        "compute_of_model": Spread.of(of_model),
        "cpu_of_model": Spread.of([c / predicted["compute"]
                                   for c in got["compute_cpu_s"]]),
        "comm_of_model": Spread.of(comm_of_model),
        # measured ÷ predicted comm ÷ compute, per round: below 1, the compute ran
        # further over its roofline time than the all-reduce over its α-β time
        "models_ratio": Spread.of([c / m for c, m in zip(comm_of_model, of_model)]),
        "calls": got["calls"], "rounds": len(got["ratio"]),
    }  # fmt: skip


def jsonable(v):
    return v._asdict() if isinstance(v, Spread) else v


def table(rows: list[dict]) -> list[dict]:
    unit = {"DP": "T", "TP": "h"}
    return [
        {"strategy": r["strategy"],
         "point": f"{unit[r['strategy']]} = {r['x']} ({r['where']} "
                  f"{r['x_star']:.3g})",
         "compute ms, model": round(r["predicted_compute_s"] * 1e3, 3),
         "comm ms, model": round(r["predicted_comm_s"] * 1e3, 3),
         "comm ÷ compute, model": round(r["predicted_ratio"], 2),
         "compute ms, measured": r["compute_s"].text(3, 1e3),
         "compute, CPU ÷ model": r["cpu_of_model"].text(1),
         "comm ms, measured": r["comm_s"].text(3, 1e3),
         "comm ÷ compute, measured": r["ratio"].text(2),
         "measured side": r["side"],
         "as predicted": {r["predicted_side"]: "✓", NEITHER: "–"}.get(r["side"], "✗")}
        for r in rows
    ]  # fmt: skip


def figure(strategy: str, model: dict, x_star, rows: list, p: int, T: int) -> dict:
    mine = [r for r in rows if r["strategy"] == strategy]
    xs = [r["x"] for r in mine] + ([x_star] if x_star else [])
    xs = xs or ([1, 2**16] if strategy == "DP" else [8, 8192])  # no crossover here
    lo, hi = max(1.0, min(xs) / 4), max(xs) * 4
    grid = [lo * (hi / lo) ** (i / 48) for i in range(49)]
    comm = "all-reduce (α-β)" if strategy == "DP" else "two all-reduces (α-β)"
    series = {
        "compute (roofline)": [(x, model["compute"](x)) for x in grid],
        comm: [(x, model["comm"](x)) for x in grid],
    }
    ys = [y for s in series.values() for _, y in s]
    if x_star:
        star = "T*" if strategy == "DP" else "h*"
        series[f"crossover {star} = {x_star:.3g}"] = [(x_star, min(ys)),
                                                      (x_star, max(ys))]  # fmt: skip
    if mine:
        series["compute, measured"] = [(r["x"], r["compute_s"].median)
                                       for r in mine]  # fmt: skip
        series["communication, measured"] = [(r["x"], r["comm_s"].median)
                                             for r in mine]  # fmt: skip
    models = {"compute (roofline)": "compute, measured",
              comm: "communication, measured"} if mine else {}  # fmt: skip
    if strategy == "DP":
        title = f"DP on {p} ranks: compute grows with the batch, the all-reduce doesn't"
        x_label = "tokens a rank, T"
    else:
        title = f"TP on {p} ranks, {T} tokens: compute grows as h², messages as h"
        x_label = "hidden size, h"
    return line_chart(
        series, title=title, x_label=x_label, y_label="seconds a step (median)",
        log_x=True, log_y=True, model_of=models,
        description=f"{strategy}: a step's compute on this rank's roofline and its "
        "communication by α-β, the crossover where they are equal, and the two "
        "points measured over gloo.",
    )  # fmt: skip


def findings(
    rows: list[dict], roof: Roof, p: int, T: int, t_star, h_star, load: list
) -> list[str]:
    """The sentences the note states, rendered from this run."""
    m = roof.machine
    said = [
        f"A rank's share of this machine ({p} ranks on {os.cpu_count()} cores): "
        f"{roof.peak / 1e9:.0f} GFLOP/s and {roof.bandwidth / 1e9:.1f} GB/s; "
        f"a message: α = {m.alpha * 1e6:.0f} µs, 1/β = {1 / m.beta / 1e9:.2f} GB/s.",
    ]
    N, link = LAYERS * WIDTH**2, roof.peak * (m.beta + m.gamma / 2)  # FLOP a byte
    cap = dp_comm(WIDTH, LAYERS, p, roof) / dp_compute(0, WIDTH, LAYERS, roof)
    if t_star:
        said.append(
            f"DP, {LAYERS} Linears of width {WIDTH} (N = {N:,} parameters, "
            f"{4 * N / 2**20:.0f} MiB of gradients): the all-reduce is predicted "
            f"at {dp_comm(WIDTH, LAYERS, p, roof) * 1e3:.2f} ms whatever the batch; "
            f"compute reaches it at T* = {t_star:.3g} tokens a rank. Without α and "
            f"with every matmul compute-bound it would be 4(p−1)/(3p)·peak·β′ = "
            f"{4 * (p - 1) / (3 * p) * link:.3g}, whatever N is (β′ = β + γ/2: a "
            f"byte sent and added; peak·β′ = {link:.1f} FLOP a byte). Below the "
            f"roofline's knee the matmuls are memory-bound, so however small the "
            f"batch, comm ÷ compute never exceeds {cap:.2f}."
        )
    else:
        said.append(
            "DP: compute and the all-reduce never cross on this machine in this run: "
            "below the roofline's knee the matmuls are memory-bound, and with this "
            f"run's roof comm ÷ compute never exceeds {cap:.2f}, so no batch is "
            "communication-bound and there is no point to check on either side."
        )
    if h_star:
        said.append(
            f"TP, {T} tokens: the two all-reduces and the matmuls are predicted to "
            f"cross at h* = {h_star:.3g}; narrower is communication-bound. Without "
            f"α it would be (t−1)·peak·β′/3 = {(p - 1) * link / 3:.3g}, whatever T is."
        )
    else:
        said.append("TP: the matmuls and the all-reduces never cross here.")
    for r in rows:
        unit = "T" if r["strategy"] == "DP" else "h"
        text = (
            f"{r['strategy']} at {unit} = {r['x']} ({r['where']} {r['x_star']:.3g}): "
            f"predicted comm ÷ compute {r['predicted_ratio']:.2f}, "
            f"{r['predicted_side']}; measured {r['ratio'].text(2)} (median [IQR] of "
            f"{r['rounds']} rounds): "
        )
        if r["side"] == r["predicted_side"]:
            text += f"{r['side']}, the side predicted."
        elif r["side"] == NEITHER:
            text += "not separated from 1 by the spread."
        else:
            text += f"{r['side']}, the other side."
        if r["side"] != r["predicted_side"]:
            text += (
                f" The compute took {r['compute_of_model'].text(1)}× its roofline "
                f"time, the communication {r['comm_of_model'].text(1)}× its α-β time"
                + {
                    SLOWER: ": the predicted compute is the more optimistic.",
                    FASTER: ": the predicted communication is the more optimistic.",
                }.get(verdict(r["models_ratio"]), ".")
                + f" On its thread's CPU clock the compute took "
                f"{r['cpu_of_model'].text(1)}× its roofline time"
                + {
                    FASTER: ": even on a core its ops ran below the roofline.",
                    SLOWER: ": on a core it beat the roofline's time.",
                }.get(
                    verdict(r["cpu_of_model"]),
                    ": on a core it ran at the roofline's time; the rest it waited "
                    "for one.",
                )
            )
        said.append(text)
    said.append(
        f"Load: the 1-minute load average was {load[0]:.1f} when the timing began "
        f"and {load[1]:.1f} when it ended, on {os.cpu_count()} cores."
    )
    return said


if __name__ == "__main__":
    raise SystemExit(main_entry(main, SPEC))
