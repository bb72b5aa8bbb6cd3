"""Pipeline schedules as plans: for p ranks and m micro-batches, each rank's list of
actions, in the order it runs them. Pure functions; nothing here touches a tensor.

An :class:`Action` is a forward ``F``, a backward ``B`` or a weight-gradient ``W`` of
one micro-batch on one model chunk. Rank ``rank`` holds chunks 0..v-1, and chunk c on
it is pipeline stage ``c * p + rank`` of ``v * p``: interleaving deals the layers out
round-robin, so a micro-batch visits every rank v times. A schedule without ``W``
actions computes the weight gradient inside ``B``.

* ``gpipe`` (Huang et al. 2019): all m forwards, then all m backwards.
* ``1f1b`` (PipeDream-flush, Narayanan et al. 2021): ``p - rank - 1`` warm-up
  forwards, then one forward, one backward, ..., then the remaining backwards.
* ``interleaved`` (Megatron-LM, Narayanan et al. 2021 §2.2): 1F1B over v chunks per
  rank, micro-batches in groups of p per chunk; m must be a multiple of p.
* ``zb-h1`` (Qi et al. 2023, "Zero Bubble Pipeline Parallelism"): 1F1B with the
  backward split in B (input gradient, on the critical path) and W (weight gradient,
  which nobody waits for); rank r runs each W r micro-batches late, so the
  later stages hurry the input gradients upstream and fill their own idle tail with W.

    schedule("1f1b", p=3, m=4)[0]  ->  [F0, F1, F2, B0, F3, B1, B2, B3]
"""

from __future__ import annotations

from dataclasses import dataclass

from snippets.core.errors import UsageError

NAMES = ("gpipe", "1f1b", "interleaved", "zb-h1")


@dataclass(frozen=True)
class Action:
    kind: str  # "F" forward, "B" backward (input gradient), "W" weight gradient
    microbatch: int  # j in 0..m-1
    chunk: int = 0  # c in 0..v-1: stage c * p + rank

    def __repr__(self) -> str:  # F3, or F3:1 on chunk 1
        return f"{self.kind}{self.microbatch}" + (
            f":{self.chunk}" if self.chunk else ""
        )


# --8<-- [start:plans]
def gpipe(p: int, m: int, rank: int) -> list[Action]:
    """All forwards, then all backwards: every rank keeps m activations."""
    return [Action("F", j) for j in range(m)] + [Action("B", j) for j in range(m)]


def one_f_one_b(p: int, m: int, rank: int) -> list[Action]:
    """Warm up with p - rank - 1 forwards, then alternate: stage s keeps p - s."""
    warmup = min(p - rank - 1, m)
    plan = [Action("F", j) for j in range(warmup)]
    for j in range(m - warmup):  # steady state: the forward of j + warmup, B of j
        plan += [Action("F", j + warmup), Action("B", j)]
    return plan + [Action("B", j) for j in range(m - warmup, m)]


def interleaved(p: int, m: int, rank: int, v: int) -> list[Action]:
    """Megatron's order: the k-th forward is micro-batch (k // pv)·p + k % p on chunk
    (k // p) % v; backwards walk the chunks in reverse. Warm-up is Megatron's
    2(p - rank - 1) + (v - 1)p, so that the first backward's gradient has arrived."""
    if v == 1:
        return one_f_one_b(p, m, rank)

    def nth(k: int, kind: str) -> Action:
        chunk = (k // p) % v
        j = (k // (p * v)) * p + k % p
        return Action(kind, j, chunk if kind == "F" else v - 1 - chunk)

    total = v * m  # chunk-micro-batches per rank
    warmup = min(2 * (p - rank - 1) + (v - 1) * p, total)
    plan = [nth(k, "F") for k in range(warmup)]
    for k in range(total - warmup):
        plan += [nth(k + warmup, "F"), nth(k, "B")]
    return plan + [nth(k, "B") for k in range(total - warmup, total)]


def zb_h1(p: int, m: int, rank: int) -> list[Action]:
    """1F1B's F and B order; W of micro-batch j runs right after B of j + rank (or at
    the end), so stage s holds at most p activations, as many as 1F1B's stage 0."""
    plan: list[Action] = []
    for action in one_f_one_b(p, m, rank):
        plan.append(action)
        if action.kind == "B" and action.microbatch >= rank:
            plan.append(Action("W", action.microbatch - rank))
    done = {a.microbatch for a in plan if a.kind == "W"}
    return plan + [Action("W", j) for j in range(m) if j not in done]


# --8<-- [end:plans]


def check_arguments(name: str, p: int, m: int, v: int) -> None:
    """One line for each way a request can be wrong."""
    if name not in NAMES:
        raise UsageError(f"unknown schedule {name!r}: choose {', '.join(NAMES)}")
    for letter, value in (("p", p), ("m", m), ("v", v)):
        if not isinstance(value, int) or value < 1:
            raise UsageError(f"{letter} must be a whole number >= 1, got {value!r}")
    if v > 1 and name != "interleaved":
        raise UsageError(f"{name} has one chunk per rank: use v=1 or interleaved")
    if name == "interleaved" and v > 1 and m % p:
        raise UsageError(
            f"interleaved runs micro-batches in groups of p={p}: m={m} must be a "
            f"multiple of {p}"
        )


# --8<-- [start:schedule]
def schedule(name: str, p: int, m: int, v: int = 1) -> list[list[Action]]:
    """One action list per rank, rank 0 first."""
    check_arguments(name, p, m, v)
    if name == "interleaved":
        return [interleaved(p, m, rank, v) for rank in range(p)]
    plan = {"gpipe": gpipe, "1f1b": one_f_one_b, "zb-h1": zb_h1}[name]
    return [plan(p, m, rank) for rank in range(p)]


def stage(action: Action, p: int, rank: int) -> int:
    """Chunk c of rank r is stage c·p + r: the micro-batch goes round the ranks v
    times."""
    return action.chunk * p + rank


# --8<-- [end:schedule]
