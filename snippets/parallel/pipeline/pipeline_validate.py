"""Check a plan before running it: the rules, a dry run for deadlocks, and what it
costs in time and activations.

:func:`check` holds a plan to the rules: p lists, every rank runs F and B (and W for
all or for none) of each micro-batch on each of its chunks exactly once, and on one
rank F before B before W. :func:`simulate` then plays the lists the way the executor
runs them: a receive blocks until the sender has finished the action that produces
it, a send is posted and never waits. An action starts when its rank is free and its
inputs have arrived:

* F of stage s, micro-batch j: after F of stage s - 1, j (its input activation);
* B of s, j: after F of s, j and after B of s + 1, j (its output gradient);
* W of s, j: after B of s, j.

If at some point no rank can start its next action and some are left, the plan
deadlocks, and the error names what each rank waits for. Times are unit by default:
F = B = W = 1 per rank's share of the model, B + W when the plan folds W into B, each
divided by v for a chunk; or any duration per (rank, action), to replay a run.
:func:`peak_in_flight` counts, per rank, the most
micro-batch-chunks whose forward has run and whose last backward action has not: the
activations it must hold.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from fractions import Fraction
from typing import Callable

from snippets.parallel.pipeline.pipeline_schedules import Action, stage

UNIT = {"F": Fraction(1), "B": Fraction(1), "W": Fraction(1)}


class PlanError(ValueError):
    """A plan that breaks a rule or deadlocks; the message says where."""


@dataclass
class Simulation:
    spans: list[list[tuple[Action, float, float]]]  # per rank: (action, start, end)
    makespan: float

    @property
    def busy(self) -> float:
        return sum(end - start for spans in self.spans for _, start, end in spans)

    @property
    def bubble(self) -> float:
        """Idle share of the p × makespan rectangle: 1 - busy / (p · makespan)."""
        return 1 - self.busy / (len(self.spans) * self.makespan)


def has_w(plan: list[list[Action]]) -> bool:
    return any(a.kind == "W" for actions in plan for a in actions)


# --8<-- [start:check]
def check(plan: list[list[Action]], p: int, m: int, v: int = 1) -> None:
    """Raise PlanError unless each rank runs each of its actions exactly once, in an
    order that is possible on one rank (F before B before W)."""
    if len(plan) != p:
        raise PlanError(f"{len(plan)} action lists for p={p} ranks")
    kinds = "FBW" if has_w(plan) else "FB"
    expected = Counter(
        Action(k, j, c) for k in kinds for j in range(m) for c in range(v)
    )
    for rank, actions in enumerate(plan):
        got = Counter(actions)
        if got != expected:
            extra, missing = got - expected, expected - got
            raise PlanError(
                f"rank {rank}: extra {list(extra)}, missing {list(missing)}"
            )
        seen: set[Action] = set()
        for a in actions:
            before = {"F": None, "B": "F", "W": "B"}[a.kind]
            if before and Action(before, a.microbatch, a.chunk) not in seen:
                raise PlanError(f"rank {rank}: {a!r} runs before {before}")
            seen.add(a)


def inputs(a: Action, p: int, rank: int, n_stages: int) -> list[tuple[int, Action]]:
    """(rank, action) pairs whose results `a` needs, by the dependency rules."""
    s = stage(a, p, rank)

    def at(kind: str, s: int) -> tuple[int, Action]:  # the action on stage s's rank
        return s % p, Action(kind, a.microbatch, s // p)

    if a.kind == "F":
        return [at("F", s - 1)] if s > 0 else []
    if a.kind == "B":
        return [at("F", s)] + ([at("B", s + 1)] if s < n_stages - 1 else [])
    return [at("B", s)]


# --8<-- [end:check]


# --8<-- [start:simulate]
def simulate(
    plan: list[list[Action]],
    v: int = 1,
    times: dict[str, float] | Callable[[int, Action], float] | None = None,
    latency: float = 0,
) -> Simulation:
    """Play the lists: blocking receives, posted sends, `latency` per message.
    `times`: per kind, or a function (rank, action) → duration (a replay)."""
    p, t = len(plan), dict(UNIT if times is None or callable(times) else times)
    if not has_w(plan):
        t["B"] = t["B"] + t["W"]  # B computes the weight gradient as well
    duration = times if callable(times) else (lambda r, a: t[a.kind] / v)
    end: dict[tuple[int, Action], float] = {}
    free, nxt = [0] * p, [0] * p  # when each rank is free; its next action's index
    spans: list[list[tuple[Action, float, float]]] = [[] for _ in range(p)]
    while any(nxt[r] < len(plan[r]) for r in range(p)):
        progressed = False
        for r in range(p):
            while nxt[r] < len(plan[r]):
                a = plan[r][nxt[r]]
                needs = inputs(a, p, r, p * v)
                if any(n not in end for n in needs):
                    break  # blocked in a receive
                ready = [end[n] + (latency if n[0] != r else 0) for n in needs]
                start = max([free[r], *ready])
                end[(r, a)] = free[r] = start + duration(r, a)
                spans[r].append((a, start, free[r]))
                nxt[r] += 1
                progressed = True
        if not progressed:
            waits = [
                f"rank {r} at {plan[r][nxt[r]]!r}"
                for r in range(p)
                if nxt[r] < len(plan[r])
            ]
            raise PlanError("deadlock: " + ", ".join(waits))
    return Simulation(spans, max(free))


# --8<-- [end:simulate]


# --8<-- [start:peak]
def peak_in_flight(plan: list[list[Action]]) -> list[int]:
    """Per rank, the most (micro-batch, chunk) pairs forwarded and not yet through
    their last backward action (W, or B when there is no W)."""
    last = "W" if has_w(plan) else "B"
    peaks = []
    for actions in plan:
        live = peak = 0
        for a in actions:
            live += (a.kind == "F") - (a.kind == last)
            peak = max(peak, live)
        peaks.append(peak)
    return peaks


# --8<-- [end:peak]
