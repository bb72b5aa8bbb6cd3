"""Every hand-made all-reduce in one place, by its public name, each
``f(tensor, op=ReduceOp.SUM, group=None)`` and in place like ``dist.all_reduce``; and
``ALGORITHMS``, the one set of names the benchmark and the cost model use.

==================  ====================================  ==========================
``ALGORITHMS`` key  function (module)                     schedule
==================  ====================================  ==========================
naive_root          ``naive_allreduce`` (naive_allreduce)  reduce to a root, broadcast
naive_everyone      ``naive_allreduce(variant=everyone)``  everyone sends to everyone
ring                ``ring_allreduce`` (ring_allreduce)    reduce-scatter + all-gather
tree                ``tree_allreduce`` (tree_allreduce)    pipelined binary tree
double_tree         ``double_tree_allreduce`` (same)       two complementary trees
halving_doubling    ``halving_doubling_allreduce``         Rabenseifner
==================  ====================================  ==========================

Each also takes the keywords ``check=`` (the cross-rank input check, on by default)
and ``trace=`` (a list that gets one ``Send`` per message).

    python -m snippets run allreduce -n 5     # all six against dist.all_reduce
"""

from __future__ import annotations

import argparse
import functools

import torch
import torch.distributed as dist

from snippets.comm.algorithms.halving_doubling import halving_doubling_allreduce
from snippets.comm.algorithms.naive_allreduce import naive_allreduce
from snippets.comm.algorithms.ring_allreduce import ring_allreduce
from snippets.comm.algorithms.tree_allreduce import (
    double_tree_allreduce,
    tree_allreduce,
)
from snippets.comm.messages import Send
from snippets.comm.plumbing import (
    add_numel_argument,
    check_against_builtin,
    rank_input,
)
from snippets.core.cli import main_entry
from snippets.core.runtime import Spec, print0

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
    summary="the six hand-made all-reduces side by side against dist.all_reduce",
    world_size=5,
)

# --8<-- [start:algorithms]
ALGORITHMS = {
    "naive_root": functools.partial(naive_allreduce, variant="root"),
    "naive_everyone": functools.partial(naive_allreduce, variant="everyone"),
    "ring": ring_allreduce,
    "tree": tree_allreduce,
    "double_tree": double_tree_allreduce,
    "halving_doubling": halving_doubling_allreduce,
}
# --8<-- [end:algorithms]


def main(numel: int = 300_007) -> dict:
    """Each algorithm on the same float32 input, SUM; max difference from
    dist.all_reduce. (Costs: ``python -m snippets bench allreduce``.)"""
    p = dist.get_world_size()
    x = rank_input(numel, torch.float32)  # (n,)
    rows = [
        {"algorithm": name, "max |ours − torch|": check_against_builtin(fn, x)}
        for name, fn in ALGORITHMS.items()
    ]
    print0(f"{p} ranks, {numel:,} float32, SUM; each algorithm == dist.all_reduce:")
    for row in rows:
        err = row["max |ours − torch|"]
        print0(f"  {row['algorithm']:<17} max |ours − torch| = {err:.1e}")
    return {"tables": {"algorithms": rows}, "world_size": p}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_numel_argument(parser, 300_007)


if __name__ == "__main__":
    raise SystemExit(main_entry(main, SPEC))
