"""Tree all-reduces: a pipelined binary tree, and NCCL's double binary tree.

Binary tree: partial results flow up to the root (each rank adds its children's data
to its own, then sends to its parent), and the total flows back down. The tree is
⌈log2 p⌉ deep, so latency grows like log p instead of the ring's 2(p−1) steps. Cutting
the data into segments pipelines it: a rank forwards segment s while s+1 is coming.

One tree wastes bandwidth: leaves only send, and inner nodes send twice what leaves
do. The double binary tree (Sanders, Speck & Träff 2009; NCCL 2.4, Jeaugey 2019) runs
two trees over the same ranks, in which a rank that is inner in one is a leaf in the
other, and gives each tree half the data (``bounds``). Both trees run at once.

The trees' shapes, NCCL's, are in ``binary_trees``.

    python -m snippets run tree_allreduce -n 6
"""

from __future__ import annotations

import argparse
from typing import Iterator

import torch
import torch.distributed as dist
from torch.distributed import ReduceOp

from snippets.comm import plumbing
from snippets.comm.algorithms.binary_trees import btree, depth, tree_of
from snippets.comm.messages import (
    Send,
    bounds,
    gather_trace,
    recv,
    segments,
    send,
    wait_all,
)
from snippets.comm.plumbing import begin, combine_, end
from snippets.comm.trace_frames import record_allreduce
from snippets.core import parts
from snippets.core.claims import law
from snippets.core.cli import main_entry
from snippets.core.runtime import Spec, device, print0

SPEC = Spec(
    summary="pipelined binary-tree and double-binary-tree all-reduce", world_size=6
)

SEGMENT_BYTES = 1 << 20
WINDOW = 4  # segments each child may have in flight towards me


# --8<-- [start:tree]
def _tree(
    flat: torch.Tensor,
    lo: int,
    hi: int,
    op: ReduceOp,
    ranks: list[int],
    me: int,
    which: int,
    group: dist.ProcessGroup | None,
    seg: int,
    trace: list | None,
) -> Iterator[None]:
    """All-reduce flat[lo:hi] over one tree; a generator that yields after each
    segment, so two trees take turns on one thread. Tree 2's messages carry tag 1."""
    p = len(ranks)
    pos, rank_at = tree_of(p, which)
    parent_pos, children_pos = btree(p, pos(me))
    parent = ranks[rank_at(parent_pos)] if parent_pos >= 0 else -1
    children = [ranks[rank_at(c)] for c in children_pos]
    D, d = max(depth(p, q) for q in range(p)), depth(p, pos(me))
    pieces = segments(lo, hi, seg)
    S, sends = len(pieces), []
    landing = {
        c: [flat.new_empty(min(seg, hi - lo)) for _ in range(WINDOW)] for c in children
    }

    def post(c: int, i: int) -> dist.Work | None:
        a, b = pieces[i]
        return recv(landing[c][i % WINDOW][: b - a], c, group, tag=which)

    pending = {c: [post(c, i) for i in range(min(WINDOW, S))] for c in children}
    down: list = []  # receives of the totals, posted as my partial for each goes up
    forwarded = 0  # segments whose total I have passed on to my children

    def forward(i: int) -> None:
        # idealised schedule: at depth d, the total of segment i goes down at i + D + d
        a, b = pieces[i]
        for c in children:
            sends.append(
                send(flat, a, b, c, group, trace, i + D + d, "broadcast", tag=which)
            )

    for i, (a, b) in enumerate(pieces):  # up: children's partials meet mine
        for c in children:
            pending[c][i].wait()
            combine_(flat[a:b], landing[c][i % WINDOW][: b - a], op)  # (segment,)
            if i + WINDOW < S:
                pending[c].append(post(c, i + WINDOW))
        if parent < 0:  # the root holds the total of segment i: send it down at once
            forward(i)
            forwarded += 1
        else:  # at depth d, segment i goes up at step i + D − d
            step = i + D - d
            sends.append(send(flat, a, b, parent, group, trace, step, "reduce", which))
            # the total can only arrive after my partial was read
            down.append(recv(flat[a:b], parent, group, tag=which))
        while forwarded < len(down) and down[forwarded].is_completed():
            forward(forwarded)  # pass on totals already here, without waiting:
            forwarded += 1  # up and down overlap
        yield
    while forwarded < S:  # the rest of the totals, in order
        down[forwarded].wait()
        forward(forwarded)
        forwarded += 1
        yield
    wait_all(sends)


def tree_allreduce(
    tensor: torch.Tensor,
    op: ReduceOp = ReduceOp.SUM,
    group: dist.ProcessGroup | None = None,
    *,
    segment_bytes: int = SEGMENT_BYTES,
    trace: list | None = None,
    check: bool = True,
) -> None:
    """In place, like ``dist.all_reduce``: reduce up one binary tree, broadcast down."""
    flat, ranks, me = begin(tensor, op, group, "tree_allreduce", check)
    if len(ranks) > 1:
        seg = max(1, segment_bytes // flat.element_size())
        for _ in _tree(flat, 0, flat.numel(), op, ranks, me, 0, group, seg, trace):
            pass
    end(tensor, flat, op, len(ranks))


def double_tree_allreduce(
    tensor: torch.Tensor,
    op: ReduceOp = ReduceOp.SUM,
    group: dist.ProcessGroup | None = None,
    *,
    segment_bytes: int = SEGMENT_BYTES,
    trace: list | None = None,
    check: bool = True,
) -> None:
    """In place, like ``dist.all_reduce``: half the data on each of two complementary
    trees, at once."""
    flat, ranks, me = begin(tensor, op, group, "double_tree_allreduce", check)
    if len(ranks) > 1:
        seg = max(1, segment_bytes // flat.element_size())
        lo, half, hi = bounds(flat.numel(), 2)
        trees = [
            _tree(flat, lo, half, op, ranks, me, 0, group, seg, trace),
            _tree(flat, half, hi, op, ranks, me, 1, group, seg, trace),
        ]
        if dist.get_backend(group) == "nccl":
            # NCCL ignores tags: one tree after the other keeps every pair's
            # messages in the same order on both sides
            for tree in trees:
                for _ in tree:
                    pass
        while trees:  # take turns, one segment each, until both trees are done
            trees = [t for t in trees if next(t, StopIteration) is not StopIteration]
    end(tensor, flat, op, len(ranks))


# --8<-- [end:tree]


def main(numel: int = 1_000_003) -> dict:
    """Both tree all-reduces against dist.all_reduce for every op; the trees' shapes;
    the bytes each rank sends, from traces, against the theory."""
    p, dev = dist.get_world_size(), device()
    x = plumbing.rank_input(numel)  # (n,) float64
    for fn in (tree_allreduce, double_tree_allreduce):
        plumbing.check_every_op(fn, x, segment_bytes=256 * 1024)
    n_small = 8 * p  # one segment per tree: the idealised step count is 2 × depth
    traces: dict[str, list[Send]] = {}
    for fn in (tree_allreduce, double_tree_allreduce):
        t: list[Send] = []
        fn(torch.ones(n_small, dtype=torch.float64, device=dev), trace=t)
        traces[fn.__name__] = gather_trace(t)
    D = max(depth(p, q) for q in range(p))
    law(D == (p - 1).bit_length(), f"tree depth {D} is not ⌈log2 {p}⌉")
    rows = []
    for r in range(p):
        roles = [
            "inner" if btree(p, tree_of(p, w)[0](r))[1] else "leaf" for w in (0, 1)
        ]
        sent = {k: sum(s.nbytes for s in tr if s.src == r) for k, tr in traces.items()}
        rows.append(
            {
                "rank": r,
                "tree 1": roles[0],
                "tree 2": roles[1],
                "bytes sent, tree": sent["tree_allreduce"],
                "bytes sent, double tree": sent["double_tree_allreduce"],
                "ring would send": round(2 * (p - 1) / p * n_small * 8),
            }
        )
    both_inner = sum(row["tree 1"] == row["tree 2"] == "inner" for row in rows)
    law(both_inner <= p % 2, f"{both_inner} ranks are inner nodes of both trees")
    steps = len({s.step for s in traces["tree_allreduce"]})
    print0(f"{p} ranks, {numel:,} float64: tree and double tree == dist.all_reduce")
    print0(f"  for {', '.join(plumbing.REDUCE_OPS)}")
    print0(
        f"tree depth {D} = ⌈log2 {p}⌉; idealised steps, one segment: {steps} = 2·depth"
    )
    most = {
        k: max(row[f"bytes sent, {k}"] for row in rows) for k in ("tree", "double tree")
    }
    print0(
        f"ranks inner in both trees: {both_inner}; most bytes a rank sent "
        f"({n_small} float64):"
    )
    print0(
        f"  tree {most['tree']}, double tree {most['double tree']}, "
        f"ring {rows[0]['ring would send']}"
    )
    players = {
        f"animation_{key}": parts.player(
            record_allreduce(fn, f"{title} all-reduce, {p} ranks, {p} elements")
        )
        for key, fn, title in (
            ("tree", tree_allreduce, "Binary-tree"),
            ("double_tree", double_tree_allreduce, "Double-binary-tree"),
        )
    }
    print0("animations of both: last frame == dist.all_reduce")
    return {
        "tables": {"roles": rows},
        "parts": players,
        "depth": D,
        "world_size": p,
    }


def add_arguments(parser: argparse.ArgumentParser) -> None:
    plumbing.add_numel_argument(parser, 1_000_003)


if __name__ == "__main__":
    raise SystemExit(main_entry(main, SPEC))
