"""The planners: hand-worked lists, then every schedule for p in 1..5, m in 1..8,
v in 1..3 held to the validator and to the papers' bubble and peak formulas."""

from __future__ import annotations

from collections import Counter

import pytest

from snippets.core.runtime import UsageError
from snippets.parallel.pipeline.pipeline_formulas import bubble_formula, peak_formula
from snippets.parallel.pipeline.pipeline_schedules import NAMES, Action, schedule, stage
from snippets.parallel.pipeline.pipeline_validate import check, peak_in_flight, simulate


def names(actions: list[Action]) -> list[str]:
    return [repr(a) for a in actions]


def test_hand_worked_lists() -> None:
    plan = schedule("1f1b", 3, 4)
    assert names(plan[0]) == "F0 F1 F2 B0 F3 B1 B2 B3".split()
    assert names(plan[2]) == "F0 B0 F1 B1 F2 B2 F3 B3".split()
    assert names(schedule("gpipe", 2, 2)[1]) == "F0 F1 B0 B1".split()
    # ZB-H1 on the last of 3 ranks: each W two micro-batches late, the rest at the end
    zb = schedule("zb-h1", 3, 4)[2]
    assert names(zb) == "F0 B0 F1 B1 F2 B2 W0 F3 B3 W1 W2 W3".split()
    assert names(schedule("zb-h1", 3, 4)[0])[:6] == "F0 F1 F2 B0 W0 F3".split()
    # interleaved, p = 2, v = 2: micro-batches in groups of 2 per chunk
    first = schedule("interleaved", 2, 2, 2)[0]
    assert names(first)[:4] == ["F0", "F1", "F0:1", "F1:1"]
    assert stage(Action("F", 0, 1), 2, 0) == 2 and stage(Action("B", 3, 2), 3, 1) == 7


def test_interleaved_with_one_chunk_is_1f1b() -> None:
    assert schedule("interleaved", 4, 6, 1) == schedule("1f1b", 4, 6)


def every_case():
    for name in NAMES:
        for p in range(1, 6):
            for m in range(1, 9):
                for v in range(1, 4) if name == "interleaved" else (1,):
                    if name == "interleaved" and v > 1 and m % p:
                        continue
                    yield name, p, m, v


@pytest.mark.parametrize("name", NAMES)
def test_every_plan_is_valid_and_costs_what_the_formulas_say(name: str) -> None:
    cases = [c for c in every_case() if c[0] == name]
    assert len(cases) >= 40
    for _, p, m, v in cases:
        plan = schedule(name, p, m, v)
        check(plan, p, m, v)  # raises on a broken plan
        w = name == "zb-h1"
        for actions in plan:  # each action exactly once, counted independently
            assert Counter(actions) == Counter(
                Action(k, j, c) for k in "FBW"[: 2 + w] for j in range(m)
                for c in range(v)
            )  # fmt: skip
        where = f"{name} p={p} m={m} v={v}"
        assert simulate(plan, v).bubble == bubble_formula(name, p, m, v), where
        assert peak_in_flight(plan) == peak_formula(name, p, m, v), where


def test_gpipe_and_1f1b_take_the_same_time_1f1b_holds_less() -> None:
    for p, m in [(2, 5), (3, 7), (5, 8)]:  # m > p
        g, f = schedule("gpipe", p, m), schedule("1f1b", p, m)
        assert simulate(g).makespan == simulate(f).makespan == 3 * (m + p - 1)
        assert max(peak_in_flight(f)) == p < m == max(peak_in_flight(g))


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("pipedream", 2, 4), "unknown schedule"),
        (("1f1b", 2, 4, 0), "v must be"),
        (("1f1b", 0, 4), "p must be"),
        (("gpipe", 2, 0), "m must be"),
        (("gpipe", 2, 4, 2), "one chunk per rank"),
        (("interleaved", 2, 3, 2), "multiple of 2"),
        (("interleaved", 4, 2, 2), "multiple of 4"),
    ],
)
def test_bad_requests_are_one_line_usage_errors(args, message) -> None:
    with pytest.raises(UsageError, match=message) as error:
        schedule(*args)
    assert "\n" not in str(error.value)
