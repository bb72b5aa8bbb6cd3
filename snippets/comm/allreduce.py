"""Every hand-made all-reduce in one place, by its public name, each
``f(tensor, op=ReduceOp.SUM, group=None)`` and in place like ``dist.all_reduce``; and the
trace type (``Send``) their optional ``trace=`` list is filled with.

=============================  ===========================  ==========================
function                       module (one note each)       schedule
=============================  ===========================  ==========================
``naive_allreduce``            ``naive_allreduce``          reduce to a root, broadcast
``ring_allreduce``             ``ring_allreduce``           reduce-scatter + all-gather
``tree_allreduce``             ``tree_allreduce``           pipelined binary tree
``double_tree_allreduce``      ``tree_allreduce``           two complementary trees
``halving_doubling_allreduce`` ``halving_doubling``         Rabenseifner
=============================  ===========================  ==========================

    python -m snippets run allreduce -n 5     # all five against dist.all_reduce
"""

from __future__ import annotations

import argparse

import torch
import torch.distributed as dist

from snippets.comm.halving_doubling import halving_doubling_allreduce
from snippets.comm.naive_allreduce import naive_allreduce
from snippets.comm.plumbing import Send
from snippets.comm.ring_allreduce import ring_allreduce
from snippets.comm.tree_allreduce import double_tree_allreduce, tree_allreduce
from snippets.core.cli import main_entry, positive_int
from snippets.core.runtime import Spec, device, print0

__all__ = [
    "ALGORITHMS",
    "Send",
    "naive_allreduce",
    "ring_allreduce",
    "tree_allreduce",
    "double_tree_allreduce",
    "halving_doubling_allreduce",
]

SPEC = Spec(
    summary="the five hand-made all-reduces side by side against dist.all_reduce",
    world_size=5,
)

ALGORITHMS = {
    "naive": naive_allreduce,
    "ring": ring_allreduce,
    "tree": tree_allreduce,
    "double_tree": double_tree_allreduce,
    "halving_doubling": halving_doubling_allreduce,
}


def main(numel: int = 300_007) -> dict:
    """Each algorithm on the same float32 input; max difference from dist.all_reduce.
    (Costs are measured by ``python -m snippets bench allreduce``.)"""
    p, me, dev = dist.get_world_size(), dist.get_rank(), device()
    x = torch.randn(numel, generator=torch.Generator().manual_seed(me)).to(
        dev
    )  # (n,) float32
    theirs = x.clone()
    dist.all_reduce(theirs)
    rows = []
    for name, fn in ALGORITHMS.items():
        ours = x.clone()
        fn(ours)
        err = (ours - theirs).abs().max().item()
        assert torch.allclose(ours, theirs, rtol=1e-5, atol=1e-5), (
            f"{name}: max |ours − torch| = {err}"
        )
        rows.append({"algorithm": name, "max |ours − torch|": err})
    print0(
        f"{p} ranks, {numel:,} float32 elements, SUM; every algorithm matches dist.all_reduce:"
    )
    for row in rows:
        print0(
            f"  {row['algorithm']:<17} max |ours − torch| = {row['max |ours − torch|']:.1e}"
        )
    return {"tables": {"algorithms": rows}, "world_size": p}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--numel",
        type=positive_int,
        default=300_007,
        help="elements to all-reduce (default 300,007)",
    )


if __name__ == "__main__":
    raise SystemExit(main_entry(main, SPEC))
