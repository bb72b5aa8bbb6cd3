"""Every collective from point-to-point, each checked against torch's own: broadcast,
scatter, gather and reduce (``rooted_collectives``); all_gather, reduce_scatter,
all_to_all and barrier (``symmetric_collectives``). Built only from
``dist.isend``/``dist.irecv``, with the arguments and in-place behaviour of the
``torch.distributed`` function of the same name; ``src``/``dst`` are global ranks.

A barrier has no output to compare, so it is checked by its one promise: no rank
leaves it before the last rank has arrived (``barrier_times``).

    python -m snippets run collectives -n 4
"""

from __future__ import annotations

import time
from typing import Callable

import torch
import torch.distributed as dist
from torch.distributed import ReduceOp

from snippets.comm.collective.collective_frames import CASES, record_collective
from snippets.comm.collective.rooted_collectives import (
    broadcast,
    gather,
    reduce,
    scatter,
)
from snippets.comm.collective.symmetric_collectives import (
    all_gather,
    all_to_all,
    barrier,
    reduce_scatter,
)
from snippets.core import parts
from snippets.core.claims import law
from snippets.core.cli import main_entry
from snippets.core.parts import Excerpt
from snippets.core.runtime import Spec, device, print0

__all__ = [
    "broadcast",
    "scatter",
    "gather",
    "reduce",
    "all_gather",
    "reduce_scatter",
    "all_to_all",
    "barrier",
]

SPEC = Spec(
    summary="the eight collectives from send/recv, each against torch's own",
    world_size=4,
)

SCHEDULES = {  # collective: (schedule, rounds on the critical path, as a function of p)
    "broadcast": ("binomial tree", "⌈log2 p⌉"),
    "reduce": ("binomial tree", "⌈log2 p⌉"),
    "scatter": ("flat fan-out", "1 (root sends p−1)"),
    "gather": ("flat fan-in", "1 (root gets p−1)"),
    "all_gather": ("ring", "p−1"),
    "reduce_scatter": ("ring", "p−1"),
    "all_to_all": ("pairwise exchange", "p−1"),
    "barrier": ("dissemination", "⌈log2 p⌉"),
}
BARRIER_DELAY_S = 0.2


# --8<-- [start:barrier_check]
def barrier_times(
    barrier_fn: Callable[[], None] = barrier,
    delay_s: float = BARRIER_DELAY_S,
    group: dist.ProcessGroup | None = None,
) -> tuple[float, float]:
    """(last arrival, first departure) over the group's ranks, on the wall clock, when
    its last rank arrives ``delay_s`` late. A barrier must give first departure ≥ last
    arrival; one that does not wait lets the early ranks leave ``delay_s`` too soon."""
    ranks = dist.get_process_group_ranks(group or dist.group.WORLD)
    dist.barrier(group)  # torch's own: everyone starts the check together
    if dist.get_rank() == ranks[-1]:
        time.sleep(delay_s)
    arrived = time.time()
    barrier_fn()
    left = time.time()
    everyone: list = [None] * len(ranks)
    dist.all_gather_object(everyone, (arrived, left), group=group)
    return max(a for a, _ in everyone), min(d for _, d in everyone)


# --8<-- [end:barrier_check]


def main() -> dict:
    """Each hand-made collective and torch's own on the same int64 input must agree
    exactly; the barrier must hold back every rank until the last one arrives."""
    p, me, dev = dist.get_world_size(), dist.get_rank(), device()
    g = torch.Generator().manual_seed(1234 + me)

    def rand(n: int) -> torch.Tensor:
        return torch.randint(-9, 10, (n,), generator=g, dtype=torch.int64).to(dev)

    n, root = 5, p - 1  # an odd length, and a root that is not rank 0
    x, pieces = rand(n), [rand(n) for _ in range(p)]
    at_root = me == root

    def empties() -> list[torch.Tensor]:
        return [torch.empty_like(x) for _ in range(p)]

    # name: (ours, torch's, make), where make() → (arguments, what to compare)
    cases = {
        "broadcast": (
            lambda t: broadcast(t, src=root),
            lambda t: dist.broadcast(t, src=root),
            lambda: ((t := x.clone(),), t),
        ),
        "scatter": (
            lambda t, ps: scatter(t, ps if at_root else None, src=root),
            lambda t, ps: dist.scatter(t, ps if at_root else None, src=root),
            lambda: ((t := torch.empty_like(x), [q.clone() for q in pieces]), t),
        ),
        "gather": (
            lambda t, out: gather(t, out if at_root else None, dst=root),
            lambda t, out: dist.gather(t, out if at_root else None, dst=root),
            lambda: ((x, out := empties()), out if at_root else []),
        ),
        "reduce": (
            lambda t: reduce(t, dst=root, op=ReduceOp.MAX),
            lambda t: dist.reduce(t, dst=root, op=ReduceOp.MAX),
            lambda: ((t := x.clone(),), t if at_root else x),
        ),
        "all_gather": (
            all_gather,
            dist.all_gather,
            lambda: ((out := empties(), x), out),
        ),
        "reduce_scatter": (
            reduce_scatter,
            dist.reduce_scatter,
            lambda: ((t := torch.empty_like(x), pieces), t),
        ),
        "all_to_all": (
            all_to_all,
            dist.all_to_all,
            lambda: ((out := empties(), pieces), out),
        ),
    }
    rows = []
    for name, (ours, theirs, make) in cases.items():
        (a_args, a), (b_args, b) = make(), make()
        ours(*a_args), theirs(*b_args)
        same = all(map(torch.equal, a, b)) if isinstance(a, list) else torch.equal(a, b)
        law(same, f"rank {me}: {name} differs from dist.{name}")
        rows.append((name, "== torch's ✓"))

    # gloo's all_to_all wants equal pieces: the oracle is all_gather_object
    uneven_in = [rand((me + j) % 3 + 1) for j in range(p)]  # i sends (i+j)%3+1 to j
    uneven_out = [
        torch.empty((j + me) % 3 + 1, dtype=x.dtype, device=dev) for j in range(p)
    ]
    all_to_all(uneven_out, uneven_in)
    everyone: list = [None] * p
    dist.all_gather_object(everyone, [t.cpu() for t in uneven_in])
    got = [t.cpu() for t in uneven_out]
    law(
        all(map(torch.equal, got, [everyone[j][me] for j in range(p)])),
        "uneven all_to_all equals all_gather_object's pieces",
    )
    rows.append(("all_to_all, uneven", "== all_gather_object ✓"))

    last_in, first_out = barrier_times(barrier, BARRIER_DELAY_S)
    early = last_in - first_out
    law(early <= 0, f"a rank left the barrier {early:.3f} s before the last came")
    rows.append(("barrier", "waited for the last ✓"))

    table = []
    for c, check in rows:
        schedule, rounds = SCHEDULES[c.split(",")[0]]
        table.append(
            {"collective": c, "schedule": schedule, "rounds": rounds, "check": check}
        )
    said = Excerpt()  # what the note shows: the run, the barrier, the animations
    said(f"{p} ranks, int64, length {n}, root {root}; all_to_all also uneven")
    for r in table:
        c, s, k = r["collective"], r["schedule"], r["rounds"]
        print0(f"  {c:<18} {s:<17} {k:<18} {r['check']}")
    said(
        f"barrier: rank {p - 1} came {BARRIER_DELAY_S:g} s late; the first rank left "
        f"{first_out - last_in:.4f} s after it came"
    )
    # each animation's last frame == the run's buffers and torch's (else it raises)
    anims = {c: record_collective(c) for c in CASES}
    steps = " ".join(str(len(a["frames"]) - 1) for a in anims.values())
    said(f"animated, in {steps} steps: last frame == the run's and torch's ✓")
    return {
        "tables": {"schedules": table},
        "excerpts": {"summary": said.lines},
        "parts": {f"animation_{c}": parts.player(a) for c, a in anims.items()},
        "world_size": p,
    }


if __name__ == "__main__":
    raise SystemExit(main_entry(main, SPEC))
