"""What the papers say a schedule costs: the bubble and the activations held.

Convention: the bubble is the idle share of the **total** time, p ranks × makespan,
with unit times F = B = W = 1 for a rank's share of the model (a chunk's are 1/v of
that; a full backward is B + W = 2). Megatron (Narayanan et al. 2021 §2.2) divides
the idle time by the **ideal** time instead: x of ideal is x / (1 + x) of total.

* GPipe and 1F1B: (p - 1)/(m + p - 1); of ideal, (p - 1)/m.
* interleaved, v chunks per rank: (p - 1)/(v·m + p - 1); of ideal, (p - 1)/(v·m).
* ZB-H1 (Qi et al. 2023): each rank idles (p - 1)(F + B - W) = p - 1 units while it
  works 3m, so (p - 1)/(3m + p - 1) when m ≥ p. With fewer micro-batches there are
  too few W to fill the drain: rank 0's first B cannot start before 2p - 1 (F0 through
  p stages, its B back through p - 1), and 2m units of B and W follow, so the
  makespan is max(3m + p - 1, 2m + 2p - 1).

Peak activations, in micro-batch-chunks per rank r: GPipe m; 1F1B min(p - r, m);
interleaved Megatron's warm-up plus one, min(2(p - r - 1) + (v - 1)p + 1, v·m), each
chunk being 1/v of the rank's layers; ZB-H1 min(p, m) on every rank (W of j runs r
micro-batches late, so rank r holds r more than 1F1B's p - r).
"""

from __future__ import annotations

from fractions import Fraction

from snippets.parallel.pipeline.pipeline_schedules import check_arguments


# --8<-- [start:bubble]
def bubble_formula(name: str, p: int, m: int, v: int = 1) -> Fraction:
    """The idle share of p × makespan, unit times (F = B = W = 1)."""
    check_arguments(name, p, m, v)
    if name in ("gpipe", "1f1b") or (name == "interleaved" and v == 1):
        return Fraction(p - 1, m + p - 1)
    if name == "interleaved":
        return Fraction(p - 1, v * m + p - 1)
    makespan = max(3 * m + p - 1, 2 * m + 2 * p - 1)  # zb-h1
    return 1 - Fraction(3 * m, makespan)


def bubble_of_ideal(name: str, p: int, m: int, v: int = 1) -> Fraction:
    """The same idle time divided by the ideal time (Megatron's convention)."""
    total = bubble_formula(name, p, m, v)
    return total / (1 - total)


# --8<-- [end:bubble]


# --8<-- [start:peak]
def peak_formula(name: str, p: int, m: int, v: int = 1) -> list[int]:
    """Per rank, the most micro-batch-chunks whose activations are held at once."""
    check_arguments(name, p, m, v)
    if name == "gpipe":
        return [m] * p
    if name == "zb-h1":
        return [min(p, m)] * p
    if name == "1f1b" or v == 1:
        return [min(p - r, m) for r in range(p)]
    return [min(2 * (p - r - 1) + (v - 1) * p + 1, v * m) for r in range(p)]


# --8<-- [end:peak]
