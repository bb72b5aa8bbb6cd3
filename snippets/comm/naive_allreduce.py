"""Naive all-reduce, two ways, and why neither scales.

1. Reduce to a root, then broadcast: every rank sends its whole vector to rank 0, which
   adds them up and sends the total back to everyone. The root receives (p−1)·n elements
   and sends (p−1)·n more; everyone else waits on that one link. Time ≈ 2(p−1)·n·β.
2. Everyone sends everything to everyone: one round, but each rank sends and receives
   (p−1)·n elements and keeps p−1 copies in memory. Time ≈ (p−1)·n·β on a full-duplex
   network with a switch, which still grows with p.

Against that, a ring sends 2(p−1)/p · n per rank: almost independent of p.

    python -m snippets run naive_allreduce -n 4
"""

from __future__ import annotations

import argparse

import torch
import torch.distributed as dist
from torch.distributed import ReduceOp

from snippets.comm.plumbing import begin, combine_, end, recv, send, wait_all
from snippets.core.cli import main_entry, positive_int
from snippets.core.runtime import Spec, device, print0

SPEC = Spec(
    summary="all-reduce the naive ways: via a root, or everyone to everyone",
    world_size=4,
)
VARIANTS = ("root", "everyone")


# --8<-- [start:naive]
def naive_allreduce(
    tensor: torch.Tensor,
    op: ReduceOp = ReduceOp.SUM,
    group: dist.ProcessGroup | None = None,
    *,
    variant: str = "root",
    trace: list | None = None,
    check: bool = True,
) -> None:
    """In place, like ``dist.all_reduce``. ``variant``: "root" (reduce to the first rank of the
    group, then broadcast) or "everyone" (all send their whole vector to all)."""
    if variant not in VARIANTS:
        raise ValueError(f"unknown variant {variant!r}: use 'root' or 'everyone'")
    flat, ranks, me = begin(tensor, op, group, "naive_allreduce", check)
    p, n = len(ranks), flat.numel()
    if p > 1 and variant == "root":
        if me == 0:
            others = [
                flat.new_empty(n) for _ in range(p - 1)
            ]  # (p−1) × (n,): the root holds everyone's data
            wait_all([recv(buf, r, group) for buf, r in zip(others, ranks[1:])])
            for buf in (
                others
            ):  # in rank order, so the result does not depend on who arrived first
                combine_(flat, buf, op)
            wait_all(
                [send(flat, 0, n, r, group, trace, 1, "broadcast") for r in ranks[1:]]
            )
        else:
            wait_all([send(flat, 0, n, ranks[0], group, trace, 0, "reduce")])
            wait_all([recv(flat, ranks[0], group)])
    elif p > 1:
        everyone = [
            flat if j == me else flat.new_empty(n) for j in range(p)
        ]  # p × (n,)
        works = [
            send(flat, 0, n, r, group, trace, 0, "everyone")
            for j, r in enumerate(ranks)
            if j != me
        ]
        works += [recv(everyone[j], r, group) for j, r in enumerate(ranks) if j != me]
        wait_all(works)
        total = everyone[0].clone()
        for other in everyone[
            1:
        ]:  # the same order on every rank: bitwise the same result everywhere
            combine_(total, other, op)
        flat.copy_(total)
    end(tensor, flat, op, p)


# --8<-- [end:naive]


def main(numel: int = 200_003) -> dict:
    """Both variants against dist.all_reduce; then bytes each rank sends, from a trace, beside the ring's."""
    p, me, dev = dist.get_world_size(), dist.get_rank(), device()
    x = torch.randn(
        numel, dtype=torch.float64, generator=torch.Generator().manual_seed(me)
    ).to(dev)  # (n,)
    for variant in VARIANTS:
        for name, op in (
            ("SUM", ReduceOp.SUM),
            ("PRODUCT", ReduceOp.PRODUCT),
            ("MIN", ReduceOp.MIN),
            ("MAX", ReduceOp.MAX),
            ("AVG", ReduceOp.AVG),
        ):
            ours, theirs = x.clone(), x.clone()
            naive_allreduce(ours, op, variant=variant)
            dist.all_reduce(theirs, op)
            assert torch.allclose(ours, theirs, rtol=1e-12, atol=1e-12), (
                f"{variant} {name} differs from torch"
            )
    n_small = 1000
    sent = {}
    for variant in VARIANTS:
        trace: list = []
        naive_allreduce(
            torch.ones(n_small, dtype=torch.float64, device=dev),
            variant=variant,
            trace=trace,
        )
        per_rank: list = [None] * p
        dist.all_gather_object(per_rank, sum(s.nbytes for s in trace))
        sent[variant] = per_rank
    nbytes = n_small * 8
    rows = [
        {
            "rank": r,
            "root: bytes sent": sent["root"][r],
            "everyone: bytes sent": sent["everyone"][r],
            "ring: bytes sent": round(2 * (p - 1) / p * nbytes),
        }
        for r in range(p)
    ]
    assert (
        sent["root"][0] == (p - 1) * nbytes and sent["everyone"][0] == (p - 1) * nbytes
    )
    print0(
        f"{p} ranks: both naive all-reduces match dist.all_reduce for SUM, PRODUCT, MIN, MAX, AVG "
        f"({numel:,} float64)"
    )
    print0(
        f"bytes sent per rank for a {nbytes:,}-byte vector: root variant {sent['root']}, "
        f"everyone variant {sent['everyone']}; a ring sends {round(2 * (p - 1) / p * nbytes):,} per rank"
    )
    return {"tables": {"bytes": rows}, "world_size": p}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--numel",
        type=positive_int,
        default=200_003,
        help="elements to all-reduce (default 200,003)",
    )


if __name__ == "__main__":
    raise SystemExit(main_entry(main, SPEC))
