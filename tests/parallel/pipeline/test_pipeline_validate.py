"""The validator catches broken plans and deadlocks; the dry run's times and the
activation count agree with schedules worked by hand."""

from __future__ import annotations

from fractions import Fraction

import pytest

from snippets.parallel.pipeline.pipeline_schedules import Action, schedule
from snippets.parallel.pipeline.pipeline_validate import (
    PlanError,
    check,
    peak_in_flight,
    simulate,
)


def plan_of(*ranks: str) -> list[list[Action]]:
    """ "F0 B0 W0" → actions; "F1:1" is chunk 1."""

    def action(text: str) -> Action:
        j, _, c = text[1:].partition(":")
        return Action(text[0], int(j), int(c or 0))

    return [[action(t) for t in r.split()] for r in ranks]


@pytest.mark.parametrize(
    ("plan", "message"),
    [
        (plan_of("F0 B0", "F0 B0"), "missing"),  # m = 2: F1, B1 lost
        (plan_of("F0 F1 B0 B1 B1", "F0 F1 B0 B1"), "extra"),
        (plan_of("F0 B1 F1 B0", "F0 F1 B0 B1"), "B1 runs before F"),
        (plan_of("F0 F1 B0 B1 W0 W1", "F0 F1 B0 W1 B1 W0"), "W1 runs before B"),
        (plan_of("F0 F1 B0 B1"), "1 action lists for p=2"),
    ],
)
def test_check_refuses_broken_plans(plan, message) -> None:
    with pytest.raises(PlanError, match=message):
        check(plan, 2, 2)


def test_a_deadlock_is_found_and_named() -> None:
    # rank 0 waits for B0 before sending F1; rank 1 wants F1 before it runs B0
    plan = plan_of("F0 B0 F1 B1", "F0 F1 B1 B0")
    check(plan, 2, 2)  # each rank alone is fine
    with pytest.raises(PlanError, match="deadlock: rank 0 at B0, rank 1 at F1"):
        simulate(plan)


def test_gpipe_dry_run_by_hand() -> None:
    # p = 2, m = 2, F = 1, B = 2 (weights folded in): rank 1 runs F0 at 1, F1 at 2,
    # B0 at 3..5, B1 at 5..7; rank 0's B0 at 5..7, B1 at 7..9
    sim = simulate(schedule("gpipe", 2, 2))
    assert [(repr(a), s, e) for a, s, e in sim.spans[1]] == [
        ("F0", 1, 2), ("F1", 2, 3), ("B0", 3, 5), ("B1", 5, 7)
    ]  # fmt: skip
    assert sim.makespan == 9 and sim.busy == 12 and sim.bubble == Fraction(1, 3)


def test_latency_and_replayed_times() -> None:
    plan = schedule("1f1b", 2, 3)
    assert simulate(plan, latency=0.5).makespan > simulate(plan).makespan == 12
    alone = schedule("1f1b", 1, 3)  # one rank sends nothing: latency costs nothing
    assert simulate(alone, latency=0.5).makespan == simulate(alone).makespan == 9
    doubled = simulate(plan, times=lambda r, a: 2 * (2 if a.kind == "B" else 1))
    assert doubled.makespan == 2 * simulate(plan).makespan
    chunks = simulate(schedule("interleaved", 2, 2, 2), v=2)
    assert all(e - s in (0.5, 1.0) for spans in chunks.spans for _, s, e in spans)


def test_peak_in_flight_by_hand() -> None:
    assert peak_in_flight(plan_of("F0 F1 B0 F2 B1 B2")) == [2]
    assert peak_in_flight(plan_of("F0 F1 B0 B1 W0 W1")) == [2]  # W releases
    assert peak_in_flight(plan_of("F0 B0 W0 F1 B1 W1")) == [1]
