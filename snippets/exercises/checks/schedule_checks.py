"""Exercises of "Distributed training, by hand" on pipeline plans: 1F1B and its bubble.

A plan is only lists of actions, so these run in one process. The oracles are the
project's plan checker and its dry run (``pipeline_validate``: every action once, F
before B, no deadlock when receives block), and the papers' numbers in
``pipeline_formulas``: a bubble of (p - 1)/(m + p - 1) of the step (Huang et al. 2019;
Narayanan et al. 2021) and min(p - r, m) activations held on rank r (PipeDream-flush).
The bubble a reader computes is held to the dry run of the project's plan.
"""

from __future__ import annotations

from fractions import Fraction

import torch

from snippets.exercises.engine import Case, Exercise, Grade
from snippets.parallel.pipeline.pipeline_formulas import bubble_formula, peak_formula
from snippets.parallel.pipeline.pipeline_schedules import Action, one_f_one_b, schedule
from snippets.parallel.pipeline.pipeline_validate import (
    PlanError,
    check,
    peak_in_flight,
    simulate,
)

SIZES = ((2, 4), (3, 4), (4, 8), (3, 1), (4, 2), (1, 3), (5, 7))  # (p, m)


def as_actions(case: Case, got, rank: int) -> list[Action] | None:
    """The reader's list as the project's Actions (any object with .kind, .microbatch
    and .chunk, or none, will do), or None and a failure."""
    if not isinstance(got, (list, tuple)):
        case.fail(f"rank {rank}'s plan is {type(got).__name__}, not a list of actions")
        return None
    try:
        return [Action(a.kind, a.microbatch, getattr(a, "chunk", 0)) for a in got]
    except AttributeError as exc:
        case.fail(f"rank {rank}'s plan holds something that is not an action: {exc}")
        return None


def check_one_f_one_b(fn, grade: Grade) -> None:
    for p, m in SIZES:
        with grade.case(f"p={p} ranks, m={m} micro-batches") as case:
            plan = []
            for rank in range(p):
                actions = as_actions(case, case.call(fn, p, m, rank), rank)
                if actions is None:
                    break
                plan.append(actions)
            if len(plan) != p:
                continue
            shown = [f"rank {r}: {' '.join(map(repr, a))}" for r, a in enumerate(plan)]
            try:
                check(plan, p, m)  # every F and B once, F before B on each rank
                run = simulate(plan)  # blocking receives: a deadlock raises
            except PlanError as exc:
                short = "extra [F" in str(exc) and m < p
                hint = "hint: with m < p the warm-up has only m micro-batches"
                case.fail(f"the plan is not runnable: {exc}", *[hint] * short, *shown)
                continue
            if not case.expect(
                all(a.kind in "FB" for a in sum(plan, [])),
                "1F1B has no W: B computes the weight gradient too",
            ):
                continue
            peaks, want = peak_in_flight(plan), peak_formula("1f1b", p, m)
            hints = []
            if peaks == [m] * p and want != peaks:
                hints.append("hint: every forward runs first: that is GPipe")
            if peaks == [max(w - 1, 1) for w in want]:
                hints.append(
                    "hint: the warm-up is one micro-batch short: rank r runs "
                    "p - r - 1 forwards before its first F, B pair"
                )
            case.expect(
                peaks == want,
                f"ranks hold {peaks} micro-batches' activations at most; 1F1B "
                f"holds min(p - r, m) = {want}",
                *hints,
                *shown,
            )
            bubble = Fraction(run.bubble).limit_denominator(10**6)
            case.expect(
                bubble == bubble_formula("1f1b", p, m),
                f"the dry run idles {bubble} of the step; 1F1B idles "
                f"(p - 1)/(m + p - 1) = {bubble_formula('1f1b', p, m)}",
                "hint: a rank waits: is the next action's input sent yet?",
                *shown,
            )


def check_bubble_fraction(fn, grade: Grade) -> None:
    for name in ("gpipe", "1f1b"):
        for p, m in SIZES:
            with grade.case(f"{name}, p={p}, m={m}") as case:
                got = case.number(case.call(fn, name, p, m), "the bubble")
                if got is None:
                    continue
                # the oracle: the project's plan, played with unit F and B times
                bubble = simulate(schedule(name, p, m)).bubble
                want = torch.tensor(float(bubble), dtype=torch.float64)
                case.equal(
                    got,
                    want,
                    "the bubble",
                    rtol=1e-9,
                    mistakes=(
                        (
                            (p - 1) / m,
                            "(p - 1)/m is the idle time over the ideal time; the "
                            "fraction of the step divides by the whole step, m + p - 1",
                        ),
                        (
                            p / (m + p),
                            "p/(m + p): each rank idles p - 1 of m + p - 1 slots",
                        ),
                        (
                            (p - 1) / (m + p),
                            "(p - 1)/(m + p): the step is m + p - 1 slots, not m + p",
                        ),
                    ),
                )


CHECKS = [
    Exercise(name="one_f_one_b", function=one_f_one_b, check=check_one_f_one_b),
    Exercise(
        name="bubble_fraction", function=bubble_formula, check=check_bubble_fraction
    ),
]
