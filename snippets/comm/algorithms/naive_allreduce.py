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

from snippets.comm import plumbing
from snippets.comm.messages import recv, send, wait_all
from snippets.comm.plumbing import begin, combine_, end
from snippets.comm.trace_frames import record_allreduce
from snippets.core import parts
from snippets.core.claims import law
from snippets.core.cli import main_entry
from snippets.core.parts import Excerpt
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
    """In place, like ``dist.all_reduce``. ``variant``: "root" (reduce to the first
    rank of the group, then broadcast) or "everyone" (all send all to all)."""
    if variant not in VARIANTS:
        raise ValueError(f"unknown variant {variant!r}: use 'root' or 'everyone'")
    flat, ranks, me = begin(tensor, op, group, "naive_allreduce", check)
    p, n = len(ranks), flat.numel()
    if p > 1 and variant == "root":
        rest = ranks[1:]
        if me == 0:  # the root holds everyone's data: (p−1) × (n,)
            others = [flat.new_empty(n) for _ in rest]
            wait_all([recv(buf, r, group) for buf, r in zip(others, rest)])
            for buf in others:  # in rank order, whoever arrived first
                combine_(flat, buf, op)
            down = [send(flat, 0, n, r, group, trace, 1, "broadcast") for r in rest]
            wait_all(down)
        else:
            wait_all([send(flat, 0, n, ranks[0], group, trace, 0, "reduce")])
            wait_all([recv(flat, ranks[0], group)])
    elif p > 1:
        # p × (n,): everyone's vector, mine in place
        everyone = [flat if j == me else flat.new_empty(n) for j in range(p)]
        others = [(j, r) for j, r in enumerate(ranks) if j != me]
        works = [send(flat, 0, n, r, group, trace, 0, "everyone") for _, r in others]
        works += [recv(everyone[j], r, group) for j, r in others]
        wait_all(works)
        # in the same order on every rank, so every rank gets the same bits
        total = everyone[0].clone()
        for other in everyone[1:]:
            combine_(total, other, op)
        flat.copy_(total)
    end(tensor, flat, op, p)


# --8<-- [end:naive]


def main(numel: int = 200_003) -> dict:
    """Both variants against dist.all_reduce for every op; then the bytes each rank
    sends, from a trace, beside what a ring sends."""
    p, dev = dist.get_world_size(), device()
    x = plumbing.rank_input(numel)  # (n,) float64
    for variant in VARIANTS:
        plumbing.check_every_op(naive_allreduce, x, variant=variant)
    n_small, sent = 1000, {}
    for variant in VARIANTS:
        trace: list = []
        ones = torch.ones(n_small, dtype=torch.float64, device=dev)
        naive_allreduce(ones, variant=variant, trace=trace)
        per_rank: list = [None] * p
        dist.all_gather_object(per_rank, sum(s.nbytes for s in trace))
        sent[variant] = per_rank
    nbytes = n_small * 8
    ring = round(2 * (p - 1) / p * nbytes)
    law(
        sent["root"][0] == sent["everyone"][0] == (p - 1) * nbytes,
        "each rank of both naive forms sends (p - 1) times the tensor's bytes",
    )
    rows = [
        {
            "rank": r,
            "root: bytes sent": sent["root"][r],
            "everyone: bytes sent": sent["everyone"][r],
            "ring: bytes sent": ring,
        }
        for r in range(p)
    ]
    said = Excerpt()  # what the note shows: both variants checked, and animated
    said(f"{p} ranks, {numel:,} float64: both naive all-reduces == dist.all_reduce")
    said(f"  for {', '.join(plumbing.REDUCE_OPS)}")
    print0(f"bytes each rank sends for a {nbytes:,}-byte vector:")
    print0(f"  root variant     {sent['root']}")
    print0(f"  everyone variant {sent['everyone']}")
    print0(f"  a ring           {ring:,} per rank")
    titles = {"root": "via a root", "everyone": "everyone to everyone"}
    players = {
        f"animation_{v}": parts.player(
            record_allreduce(
                naive_allreduce, f"Naive all-reduce {titles[v]}, {p} ranks", variant=v
            )
        )
        for v in VARIANTS
    }
    said("animations of both: last frame == dist.all_reduce")
    return {
        "tables": {"bytes": rows},
        "excerpts": {"summary": said.lines},
        "parts": players,
        "world_size": p,
    }


def add_arguments(parser: argparse.ArgumentParser) -> None:
    plumbing.add_numel_argument(parser, 200_003)


if __name__ == "__main__":
    raise SystemExit(main_entry(main, SPEC))
