"""Exercises of "What each operation costs" and "When it goes wrong": FLOPs by formula,
held to torch's own count, and the checkpoint interval, held to the minimum of the
cost it balances.

``step_flops``: the reader writes ``op_costs`` (the step profile's formulas); its
matmul and attention FLOPs must equal what ``FlopCounterMode`` counts on a real forward
and backward of the tiny GPT (the project's ``counted_flops``), at three shapes, odd
ones included. ``young_daly``: the interval must be the one that minimises the
expected waste δ/τ + (R + τ/2)/M, found here by a golden-section search on that
function, not by its closed form.
"""

from __future__ import annotations

import math

import torch

from snippets.exercises.engine import Exercise, Grade
from snippets.faults.crash_resume import waste, young_daly
from snippets.hardware.step_profile import counted_flops, op_costs
from snippets.models.tiny_gpt import GPTConfig

SHAPES = (  # vocab, block, layers, heads, width; rows
    (GPTConfig(vocab_size=256, block_size=64, n_layer=2, n_head=4, n_embd=128), 8),
    (GPTConfig(vocab_size=37, block_size=7, n_layer=3, n_head=3, n_embd=15), 5),
    (GPTConfig(vocab_size=64, block_size=16, n_layer=1, n_head=2, n_embd=32), 2),
)


def check_step_flops(fn, grade: Grade) -> None:
    for cfg, rows in SHAPES:
        title = (
            f"L={cfg.n_layer} d={cfg.n_embd} N={cfg.block_size} "
            f"V={cfg.vocab_size}, {rows} rows"
        )
        with grade.case(title) as case:
            got = case.call(fn, cfg, rows)
            if not case.expect(
                isinstance(got, dict) and {"matmul", "attention"} <= set(got),
                "it should return a dict with at least 'matmul' and 'attention'",
            ):
                continue
            counted = counted_flops(cfg, rows)  # torch's own count: the oracle
            mine = {k: float(sum(c.flops for c in got[k])) for k in counted}
            T, d, V, L = rows * cfg.block_size, cfg.n_embd, cfg.vocab_size, cfg.n_layer
            forward_mm = counted["matmul"] / 3
            head = 2 * T * d * V
            N = cfg.block_size
            case.equal(
                torch.tensor(mine["matmul"], dtype=torch.float64),
                torch.tensor(float(counted["matmul"]), dtype=torch.float64),
                "matmul FLOPs",
                mistakes=(
                    (2 * forward_mm, "backward has two matmuls a forward one: dX, dW"),
                    (forward_mm, "count backward too: dX and dW, 2× the forward"),
                    (counted["matmul"] - 3 * head, "the head (d × V) is a matmul too"),
                    (counted["matmul"] / 2, "a multiply-add is 2 FLOPs"),
                ),
            )
            case.equal(
                torch.tensor(mine["attention"], dtype=torch.float64),
                torch.tensor(float(counted["attention"]), dtype=torch.float64),
                "attention FLOPs",
                mistakes=(
                    (
                        counted["attention"] - 2 * L * rows * N * N * d,
                        "backward is 2.5× the forward: 5 matmuls of N×N×d, not 4",
                    ),
                    (4 * L * rows * N * N * d, "count backward too: 2.5× the forward"),
                ),
            )


def golden_minimum(f, lo: float, hi: float, steps: int = 200) -> float:
    """The minimiser of a unimodal f on [lo, hi], by golden-section search."""
    g = (math.sqrt(5) - 1) / 2
    a, b = lo, hi
    for _ in range(steps):
        c, d = b - g * (b - a), a + g * (b - a)
        a, b = (a, d) if f(c) < f(d) else (c, b)
    return (a + b) / 2


def check_young_daly(fn, grade: Grade) -> None:
    for delta, mtbf in ((0.173, 3600.0), (30.0, 86400.0), (2.0, 50.0), (1e-3, 1e6)):
        with grade.case(f"δ = {delta:g} s, M = {mtbf:g} s") as case:
            got = case.call(fn, delta, mtbf)
            best = golden_minimum(lambda t: waste(t, delta, mtbf, 0.0), 1e-9, mtbf)
            case.equal(
                torch.tensor(float(got), dtype=torch.float64),
                torch.tensor(best, dtype=torch.float64),
                "the interval τ",
                rtol=1e-6,
                mistakes=(
                    (best / math.sqrt(2), "√(δM) is short by √2: τ = √(2δM)"),
                    (best**2, "take the square root: τ² = 2δM"),
                    (best * math.sqrt(2), "√(4δM): the redone work is τ/2, not τ/4"),
                ),
            )


CHECKS = [
    Exercise(name="step_flops", function=op_costs, check=check_step_flops),
    Exercise(name="young_daly", function=young_daly, check=check_young_daly),
]
