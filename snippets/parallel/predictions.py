"""Prediction questions: commit to an answer, then reveal the one the formulas give.

Each question names the module that answers it and computes its answer there, when
``run-all`` runs this file: nothing a note shows as an answer is typed into Markdown.
``main`` returns one question per id (a part of kind ``predict``); run-all renders each
as ``results/predictions.<id>.md``, a small form the note includes where the question
belongs (``docs/assets/predict/predict.js`` reveals the answer and says how close the
reader's guess was; without scripts, the answer sits in a ``<details>`` the reader
opens).

    python -m snippets run predictions
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from snippets.core import parts
from snippets.core.parts import Part
from snippets.core.runtime import Spec, print0
from snippets.parallel.pipeline.pipeline_formulas import bubble_formula
from snippets.sizing.cost_formulas import naive_root_cost, ring_cost
from snippets.sizing.zero_memory import PRECISIONS, model_state_bytes

SPEC = Spec(summary="every prediction question's answer, from the formula modules")
MiB = 2**20


@dataclass(frozen=True)
class Prediction:
    id: str
    question: str
    unit: str  # what the reader types: "bytes", "fraction", …
    answer: Callable[[], float]
    why: Callable[[float], str]  # how the answer comes out, from the answer
    source: str  # the module that answers


def _ring_bytes() -> float:
    return ring_cost(4).beta * MiB  # 2(p−1)/p of the buffer leaves each rank


def _naive_bytes() -> float:
    return naive_root_cost(4).beta * MiB / 2  # half its traffic is received


def _zero3_bytes() -> float:
    p, g, k = PRECISIONS["mixed Adam"]
    return model_state_bytes(3, 7.5e9, 64, p, g, k)["total"]


PREDICTIONS = (
    Prediction(
        "ring_bytes",
        "How many bytes does rank 0 send in a 4-rank ring all-reduce of 1 MiB?",
        "bytes",
        _ring_bytes,
        lambda a: (
            f"2(p−1)/p × 1 MiB = {a / MiB:g} MiB: p−1 chunks of n/p bytes in "
            "the reduce-scatter, p−1 more in the all-gather."
        ),
        "snippets/sizing/cost_formulas.py (ring_cost)",
    ),
    Prediction(
        "naive_root_bytes",
        "In the naive all-reduce of 1 MiB on 4 ranks, how many bytes does the root "
        "receive?",
        "bytes",
        _naive_bytes,
        lambda a: f"(p−1) whole buffers = {a / MiB:g} MiB; it sends as many back.",
        "snippets/sizing/cost_formulas.py (naive_root_cost)",
    ),
    Prediction(
        "one_f_one_b_bubble",
        "What share of the step does 1F1B leave idle at p = 4 stages, m = 8 "
        "micro-batches (unit times)?",
        "fraction",
        lambda: float(bubble_formula("1f1b", 4, 8)),
        lambda a: (
            f"(p−1)/(m+p−1) = {bubble_formula('1f1b', 4, 8)} ≈ {a:.3f}: the same "
            "as GPipe's; 1F1B saves memory, not time."
        ),
        "snippets/parallel/pipeline/pipeline_formulas.py (bubble_formula)",
    ),
    Prediction(
        "zero3_bytes",
        "With ZeRO-3 on 64 GPUs, how many bytes of model state does each GPU hold "
        "for a 7.5B-parameter model trained with mixed-precision Adam?",
        "bytes",
        _zero3_bytes,
        lambda a: (
            f"16Ψ/N = 16 × 7.5e9 / 64 ≈ {a / 1e9:.3g} GB (the ZeRO paper's "
            "Figure 1 example)."
        ),
        "snippets/sizing/zero_memory.py (model_state_bytes)",
    ),
)


def question(p: Prediction, answer: float) -> Part:
    """The question a note includes, with its answer and how it comes out."""
    return parts.prediction(p.id, p.question, p.unit, answer, p.why(answer), p.source)


def main() -> dict:
    answers = {p.id: p.answer() for p in PREDICTIONS}
    for p in PREDICTIONS:
        print0(f"{p.id}: {answers[p.id]:.6g} {p.unit}  ({p.source})")
    return {
        "answers": answers,
        "parts": {p.id: question(p, answers[p.id]) for p in PREDICTIONS},
    }


if __name__ == "__main__":
    from snippets.core.cli import main_entry

    raise SystemExit(main_entry(main, SPEC))
