"""Exercises of "Distributed training, by hand": collectives built from send and recv.

Each check runs on every rank. Inputs are small integers in floating point, so a sum
is exact whatever order a rank adds in, and the oracle (the built-in collective, called
by the grader outside the reader's code) compares bit for bit.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch.distributed import ReduceOp

from snippets.comm.algorithms.ring_allreduce import ring_allreduce
from snippets.exercises.grader import Exercise, Grade


def integers(shape: tuple[int, ...], seed: int) -> torch.Tensor:
    """Small integers as float32: every partial sum is exact."""
    g = torch.Generator().manual_seed(seed)
    return torch.randint(-8, 9, shape, generator=g).to(torch.float32)


def check_ring_allreduce(fn, grade: Grade) -> None:
    rank, p = grade.rank, grade.world_size
    for shape, op in (((1,), "SUM"), ((7,), "SUM"), ((3, 5), "SUM"), ((13,), "MAX")):
        with grade.case(f"{op} of a {tuple(shape)} tensor") as case:
            mine = integers(shape, seed=100 * rank + len(shape))
            expected = mine.clone()
            dist.all_reduce(expected, op=getattr(ReduceOp, op))  # the oracle
            got = mine.clone()
            case.call(fn, got, getattr(ReduceOp, op))
            case.equal(
                got,
                expected,
                "the tensor",
                mistakes=(
                    (mine, "the tensor is unchanged: write the result into it"),
                    (expected / p, "each element is the sum ÷ p: SUM keeps the sum"),
                    (expected - mine, "the sum leaves out this rank's own tensor"),
                ),
            )
    n = 4 * p + 3  # every chunk non-empty, and not all of one size
    with grade.case(f"only neighbours, 2(p-1) = {2 * (p - 1)} sends") as case:
        case.call(fn, integers((n,), seed=rank))
        right, left = (rank + 1) % p, (rank - 1) % p
        data = [c for c in case.calls if c.dtype == "float32"]  # not a size check
        sends = [c for c in data if c.kind in ("send", "isend")]
        recvs = [c for c in data if c.kind in ("recv", "irecv")]
        case.expect(
            all(c.peer == right for c in sends) and all(c.peer == left for c in recvs),
            f"it talks to ranks other than its neighbours {left} and {right}",
            *(f"call: {c}" for c in data if c.peer not in (left, right)),
        )
        case.expect(
            len(sends) == 2 * (p - 1),
            f"it sent {len(sends)} messages; a ring sends 2(p-1) = {2 * (p - 1)}",
            "hint: p-1 steps of reduce-scatter, then p-1 of all-gather",
        )


EXERCISES = [
    Exercise(
        name="ring_allreduce",
        title="the ring all-reduce",
        note="2026-11-21-ring-allreduce",
        function=ring_allreduce,
        check=check_ring_allreduce,
        solution="snippets/comm/algorithms/ring_allreduce.py:ring",
        signature=(
            "def ring_allreduce(\n"
            "    tensor: torch.Tensor,\n"
            "    op: ReduceOp = ReduceOp.SUM,\n"
            "    group: dist.ProcessGroup | None = None,\n"
            ") -> None:"
        ),
        doc=(
            "All-reduce ``tensor`` in place over ``group``, like ``dist.all_reduce``,\n"
            "around a ring: p-1 steps of reduce-scatter (chunk by chunk, each rank\n"
            "adds what its left neighbour sends), then p-1 steps of all-gather.\n"
            "Any world size, any number of elements (some chunks may be empty)."
        ),
        hints=(
            "split the flat tensor into p chunks; chunk c is the one rank c owns last",
            "at step t rank r sends chunk (r - t) % p right, receives (r - t - 1) % p",
            "post the send before you wait on the receive, or every rank waits",
        ),
        world_sizes=(4, 3),
        point_to_point=True,
        imports=(
            "import torch\nimport torch.distributed as dist\n"
            "from torch.distributed import ReduceOp\n"
        ),
    ),
]
