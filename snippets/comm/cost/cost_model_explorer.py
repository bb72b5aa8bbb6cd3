"""The α-β explorer: which all-reduce the cost model picks, for any α, β and p.

The page recomputes every formula of ``snippets.sizing.cost_formulas`` as the reader
moves the sliders, so the formulas are written out as Vega expressions here, from the
Python ones: for each p, the coefficients of a :class:`Cost` are read off the Python
function itself, and only the choice of the trees' segment count k is re-expressed.
The tests evaluate every expression in Python and hold it to ``predict``.

The sliders start at this machine's α and β, fitted by ``cost_model`` (read from
``cost_model.json`` in the results folder run-all writes to, by default the repo's
``results/``, or ``--fit FILE``), and the dashed grey curve is the best algorithm's
time at those fitted values.

    python -m snippets run cost_model_explorer
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

from snippets.core.charts import Slider, formula_explorer
from snippets.core.cli import main_entry
from snippets.core.results import results_folder
from snippets.core.runtime import Spec, print0
from snippets.sizing.cost_formulas import FORMULAS, PIPELINED, Machine, predict

SPEC = Spec(
    summary="sliders for α, β and p: which all-reduce wins at each size",
    reads=("cost_model",),  # its fit: run-all runs cost_model first, then this
)
P_MAX = 64  # the p slider's end: one array entry per p in the expressions
SIZES = [2.0 ** (i / 2) for i in range(0, 69)]  # 1 B .. 16 GiB, √2 apart
TYPICAL = Machine(alpha=1e-5, beta=1e-10)  # if there is no fit: 10 µs, 10 GB/s


def default_fit() -> str:
    """cost_model's results in the folder run-all writes to (the repo's results/)."""
    return str(results_folder() / "cost_model.json")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--fit", default=default_fit())


def coefficients(name: str, p: int) -> tuple[float, ...]:
    """(a0, a1, b0, b1, c0, c1) with T(k) = (a0 + a1·k)α + n((b0/k + b1)β + (c0/k +
    c1)γ) for k segments: read off the formula at k = 1 and 2 (a pipelined tree's
    stage count is linear in k, and its bytes per stage go as 1/k)."""
    if name not in PIPELINED:
        c = FORMULAS[name](p)
        return (c.alpha, 0.0, 0.0, c.beta, 0.0, c.gamma)
    one, two = FORMULAS[name](p, 1), FORMULAS[name](p, 2)
    a1, b0, c0 = (
        two.alpha - one.alpha,
        2 * (one.beta - two.beta),
        2 * (one.gamma - two.gamma),
    )
    return (one.alpha - a1, a1, b0, one.beta - b0, c0, one.gamma - c0)


def expression(name: str, gamma: float) -> str:
    """T(n) in seconds as a Vega expression in datum.x (bytes), p, alpha and beta."""
    table = [[0.0] * 6] + [coefficients(name, p) for p in range(1, P_MAX + 1)]
    a0, a1, b0, b1, c0, c1 = (
        "[" + ",".join(repr(float(row[i])) for row in table) + "][p]" for i in range(6)
    )

    def time(k: str) -> str:
        return (f"(({a0} + {a1}*{k})*alpha + datum.x*(({b0}/{k} + {b1})*beta"
                f" + ({c0}/{k} + {c1})*{gamma!r}))")  # fmt: skip

    if name not in PIPELINED:
        return time("1")
    # T(k) = a1·α·k + n(b0β + c0γ)/k + const is convex: the best power of two is
    # one of the two around k* = √(n(b0β + c0γ)/(a1α)), kept to 1 ≤ k ≤ share/4
    # (predict's range: at least one float32 per segment)
    share = "datum.x/2" if name == "double_tree" else "datum.x"
    kmax = f"pow(2, floor(log(max(1, {share}/4))/LN2 + 1e-9))"
    kstar = f"sqrt(datum.x*({b0}*beta + {c0}*{gamma!r})/({a1}*alpha))"
    below = f"pow(2, floor(log(max({kstar}, 1))/LN2))"
    k1, k2 = f"min({below}, {kmax})", f"min(2*{below}, {kmax})"
    return f"min({time(k1)}, {time(k2)})"


def fitted(path: str) -> tuple[Machine | None, str]:
    """This machine's fit from cost_model's results, or None and why not."""
    try:
        result = json.loads(Path(path).read_text(encoding="utf-8"))["result"]
        m = Machine(result["alpha_s"], result["beta_s_per_byte"])
        return Machine(m.alpha, m.beta, result.get("gamma_s_per_byte", 0.0)), path
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return None, f"no fit read from {path} ({type(exc).__name__})"


def explorer(m: Machine | None, p: int = 6) -> dict:
    """The figure: sliders at the fitted α, β (or typical ones), p = ``p``."""
    start = m or TYPICAL
    curves = {name: expression(name, start.gamma) for name in FORMULAS}
    rows = []
    for n in SIZES:
        times = {name: predict(name, p, n, start) for name in FORMULAS}
        row = {"x": n, "winner": min(times, key=times.get)}
        rows.append(row | ({"fitted best (s)": min(times.values())} if m else {}))
    where = "this machine's fit" if m else "typical values (no fit found)"
    la, lb = math.log10(start.alpha), math.log10(start.beta)
    return formula_explorer(
        rows,
        curves,
        [
            Slider(
                "log_alpha", f"log10 α/s (fit {la:.2f}) ", round(la, 2), -7, -2, 0.05
            ),
            Slider(
                "log_beta",
                f"log10 β/(s/B) (fit {lb:.2f}) ",
                round(lb, 2),
                -12,
                -7,
                0.05,
            ),  # fmt: skip
            Slider("p", "ranks p ", p, 2, P_MAX, 1),
        ],
        derived={"alpha": "pow(10, log_alpha)", "beta": "pow(10, log_beta)"},
        title="All-reduce time by the α-β model: the band is the winner",
        x_label="buffer (bytes)",
        y_label="predicted time (s)",
        x_unit="B",
        y_unit="s",
        reference="fitted best (s)" if m else None,
        description=f"Each algorithm's predicted time; sliders start at {where}; "
        "the dashed grey curve is the best time at the fit.",
    )


def main(fit: str | None = None) -> dict:
    m, source = fitted(fit or default_fit())
    if m is None:
        print0(f"{source}: the sliders start at α = 10 µs, β = 0.1 ns/B instead")
    else:
        print0(f"fit from {Path(source).name}: α = {m.alpha * 1e6:.1f} µs, "
               f"1/β = {1e-9 / m.beta:.3g} GB/s, γ = {m.gamma:.3g} s/B")  # fmt: skip
    figure = explorer(m)
    winners = dict.fromkeys(r["winner"] for r in figure["data"]["values"])
    print0(f"at p = 6, from 1 B to 16 GiB, the winners are: {', '.join(winners)}")
    return {
        "figures": {"explorer": figure},
        "fitted": None if m is None else vars(m),
        "winners_p6": list(winners),
    }


if __name__ == "__main__":
    raise SystemExit(main_entry(main, SPEC))
