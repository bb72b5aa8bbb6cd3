"""Tree all-reduces: a pipelined binary tree, and NCCL's double binary tree.

Binary tree: partial results flow up to the root (each rank adds its children's data to
its own, then sends to its parent), and the total flows back down. The tree is ⌈log2 p⌉
deep, so latency grows like log p instead of the ring's 2(p−1) steps. Cutting the data
into segments pipelines it: a rank forwards segment s while segment s+1 is still coming.

One tree wastes bandwidth: leaves only send, and inner nodes send twice what leaves do.
The double binary tree (Sanders, Speck & Träff 2009; NCCL 2.4, Jeaugey 2019) builds two
trees over the same ranks such that a rank's position as an inner node in one tree is a
leaf position in the other, and gives each tree half the data. Both trees run at once.

The trees are NCCL's (src/graph/trees.cc): in tree 1 rank r's parent clears its lowest
set bit; tree 2 mirrors the ranks (r → p−1−r) when p is even and shifts them by one when
p is odd. With an even p every rank is an inner node in exactly one tree; with an odd p
one rank is inner in both.

    python -m snippets run tree_allreduce -n 6
"""

from __future__ import annotations

import argparse
from typing import Callable, Iterator

import torch
import torch.distributed as dist
from torch.distributed import ReduceOp

from snippets.comm.plumbing import begin, combine_, end, recv, send, wait_all
from snippets.core.cli import main_entry, positive_int
from snippets.core.runtime import Spec, device, print0

SPEC = Spec(
    summary="pipelined binary-tree and double-binary-tree all-reduce", world_size=6
)

SEGMENT_BYTES = 1 << 20
WINDOW = 4  # segments each child may have in flight towards me


# --8<-- [start:btree]
def btree(p: int, r: int) -> tuple[int, list[int]]:
    """(parent, children) of rank r in NCCL's binary tree over ranks 0..p−1; the root's parent is −1."""
    bit = 1
    while (
        bit < p and not bit & r
    ):  # r's lowest set bit (for r = 0: the first power of two ≥ p)
        bit <<= 1
    if r == 0:
        return -1, ([bit >> 1] if p > 1 else [])
    parent = (r ^ bit) | (
        bit << 1
    )  # clear that bit, set the next one up: the node one level higher
    if parent >= p:
        parent = r ^ bit
    low, children = bit >> 1, []
    if low:
        children.append(r - low)
    while (
        low and r + low >= p
    ):  # the right child may not exist in a tree that is not full
        low >>= 1
    if low:
        children.append(r + low)
    return parent, children


def tree_of(p: int, which: int) -> tuple[Callable[[int], int], Callable[[int], int]]:
    """(rank → position in btree, position → rank) for tree 1 (which=0) or tree 2 (which=1)."""
    if which == 0:
        return (lambda r: r), (lambda q: q)
    if (
        p % 2 == 0
    ):  # mirror: tree 1's leaves (odd positions) become tree 2's inner nodes
        return (lambda r: p - 1 - r), (lambda q: p - 1 - q)
    return (lambda r: (r - 1) % p), (lambda q: (q + 1) % p)  # shift


def depth(p: int, r: int) -> int:
    d = 0
    while (r := btree(p, r)[0]) != -1:
        d += 1
    return d


# --8<-- [end:btree]


# --8<-- [start:tree]
def _pieces(a: int, b: int, seg: int) -> list[tuple[int, int]]:
    return [(s, min(s + seg, b)) for s in range(a, b, seg)]


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
    """All-reduce flat[lo:hi] over one tree; a generator that yields after each segment so
    two trees can take turns on one thread. Messages of tree 2 carry tag 1."""
    p = len(ranks)
    pos, rank_at = tree_of(p, which)
    parent_pos, children_pos = btree(p, pos(me))
    parent = ranks[rank_at(parent_pos)] if parent_pos >= 0 else -1
    children = [ranks[rank_at(c)] for c in children_pos]
    D, d = max(depth(p, q) for q in range(p)), depth(p, pos(me))
    pieces = _pieces(lo, hi, seg)
    S, sends = len(pieces), []
    landing = {
        c: [flat.new_empty(min(seg, hi - lo)) for _ in range(WINDOW)] for c in children
    }

    def post(c: int, i: int) -> dist.Work | None:
        a, b = pieces[i]
        return recv(landing[c][i % WINDOW][: b - a], c, group, tag=which)

    pending = {c: [post(c, i) for i in range(min(WINDOW, S))] for c in children}
    down: list = []  # receives of the total, one per segment, posted as my partial for it goes up
    forwarded = 0  # segments whose total I have passed on to my children

    def forward(
        i: int,
    ) -> None:  # idealised schedule: a rank at depth d sends the total of segment i at step i + D + d
        a, b = pieces[i]
        for c in children:
            sends.append(
                send(flat, a, b, c, group, trace, i + D + d, "broadcast", tag=which)
            )

    for i, (a, b) in enumerate(
        pieces
    ):  # up: children's partial sums meet mine, then go to my parent
        for c in children:
            pending[c][i].wait()
            combine_(
                flat[a:b], landing[c][i % WINDOW][: b - a], op
            )  # (segment,) ⊕= child's partial
            if i + WINDOW < S:
                pending[c].append(post(c, i + WINDOW))
        if (
            parent < 0
        ):  # the root now holds the total of segment i: send it down at once
            forward(i)
            forwarded += 1
        else:  # a rank at depth d sends segment i up at step i + D − d
            sends.append(
                send(flat, a, b, parent, group, trace, i + D - d, "reduce", tag=which)
            )
            down.append(
                recv(flat[a:b], parent, group, tag=which)
            )  # can only arrive after my partial was read
        while (
            forwarded < len(down) and down[forwarded].is_completed()
        ):  # pass on totals that are already here,
            forward(forwarded)  # without waiting: up and down overlap
            forwarded += 1
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
    """In place, like ``dist.all_reduce``: reduce up one binary tree, broadcast back down."""
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
    """In place, like ``dist.all_reduce``: half the data on each of two complementary trees, at once."""
    flat, ranks, me = begin(tensor, op, group, "double_tree_allreduce", check)
    if len(ranks) > 1:
        seg, half = max(1, segment_bytes // flat.element_size()), flat.numel() // 2
        trees = [
            _tree(flat, 0, half, op, ranks, me, 0, group, seg, trace),
            _tree(flat, half, flat.numel(), op, ranks, me, 1, group, seg, trace),
        ]
        if (
            dist.get_backend(group) == "nccl"
        ):  # NCCL ignores tags: one tree after the other keeps
            for tree in trees:  # every pair's messages in the same order on both sides
                for _ in tree:
                    pass
        while trees:  # take turns, one segment each, until both trees are done
            trees = [t for t in trees if next(t, StopIteration) is not StopIteration]
    end(tensor, flat, op, len(ranks))


# --8<-- [end:tree]


def main(numel: int = 1_000_003) -> dict:
    """Both tree all-reduces against dist.all_reduce for every op; the trees' shapes; traces vs theory."""
    p, me, dev = dist.get_world_size(), dist.get_rank(), device()
    x = torch.randn(
        numel, dtype=torch.float64, generator=torch.Generator().manual_seed(me)
    ).to(dev)  # (n,)
    ops = {
        "SUM": ReduceOp.SUM,
        "PRODUCT": ReduceOp.PRODUCT,
        "MIN": ReduceOp.MIN,
        "MAX": ReduceOp.MAX,
        "AVG": ReduceOp.AVG,
    }
    for fn in (tree_allreduce, double_tree_allreduce):
        for name, op in ops.items():
            ours, theirs = x.clone(), x.clone()
            fn(ours, op, segment_bytes=256 * 1024)
            dist.all_reduce(theirs, op)
            assert torch.allclose(ours, theirs, rtol=1e-12, atol=1e-12), (
                f"{fn.__name__} {name} differs from torch"
            )

    n_small = 8 * p  # one segment per tree: the idealised step count is 2 × depth
    traces = {}
    for fn in (tree_allreduce, double_tree_allreduce):
        t: list = []
        fn(torch.ones(n_small, dtype=torch.float64, device=dev), trace=t)
        everyone: list = [None] * p
        dist.all_gather_object(everyone, t)
        traces[fn.__name__] = [s for part in everyone for s in part]
    D = max(depth(p, q) for q in range(p))
    assert D == (p - 1).bit_length(), f"tree depth {D} is not ⌈log2 {p}⌉"
    rows = []
    for r in range(p):
        roles = [
            "inner" if btree(p, tree_of(p, w)[0](r))[1] else "leaf" for w in (0, 1)
        ]
        sent = {
            name: sum(s.nbytes for s in tr if s.src == r) for name, tr in traces.items()
        }
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
    assert both_inner <= p % 2, f"{both_inner} ranks are inner nodes of both trees"
    print0(
        f"{p} ranks: tree and double-tree all-reduce match dist.all_reduce for SUM, PRODUCT, MIN, MAX, AVG "
        f"({numel:,} float64)"
    )
    print0(
        f"tree depth {D} = ⌈log2 {p}⌉; idealised steps for one segment: "
        f"{len({s.step for s in traces['tree_allreduce']})} = 2·depth"
    )
    print0(
        f"ranks inner in both trees: {both_inner}; max bytes sent by a rank ({n_small} float64): "
        f"tree {max(r['bytes sent, tree'] for r in rows)}, double tree "
        f"{max(r['bytes sent, double tree'] for r in rows)}, ring {rows[0]['ring would send']}"
    )
    return {"tables": {"roles": rows}, "depth": D, "world_size": p}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--numel",
        type=positive_int,
        default=1_000_003,
        help="elements to all-reduce (default 1,000,003)",
    )


if __name__ == "__main__":
    raise SystemExit(main_entry(main, SPEC))
