"""The binary trees of NCCL's tree all-reduce (src/graph/trees.cc), as plain functions
of (p, rank): no process group needed, so every p can be checked at once.

In tree 1 rank r's parent is r with its lowest set bit cleared and the next one up
set, so the tree is ⌈log2 p⌉ deep. Tree 2, for the double binary tree, mirrors the
ranks (r → p−1−r) when p is even and shifts them by one when p is odd. With an even p
every rank is an inner node in exactly one tree; with an odd p one rank is inner in
both.
"""

from __future__ import annotations

from typing import Callable


# --8<-- [start:btree]
def btree(p: int, r: int) -> tuple[int, list[int]]:
    """(parent, children) of rank r in NCCL's binary tree over ranks 0..p−1; the
    root's parent is −1."""
    bit = 1
    while bit < p and not bit & r:  # r's lowest set bit (r = 0: first 2^k ≥ p)
        bit <<= 1
    if r == 0:
        return -1, ([bit >> 1] if p > 1 else [])
    parent = (r ^ bit) | (bit << 1)  # clear that bit, set the next: one level up
    if parent >= p:
        parent = r ^ bit
    low, children = bit >> 1, []
    if low:
        children.append(r - low)
    while low and r + low >= p:  # the right child may be missing in a partial tree
        low >>= 1
    if low:
        children.append(r + low)
    return parent, children


def tree_of(p: int, which: int) -> tuple[Callable[[int], int], Callable[[int], int]]:
    """(rank → position in btree, position → rank) for tree 1 (which=0) or tree 2."""
    if which == 0:
        return (lambda r: r), (lambda q: q)
    if p % 2 == 0:  # mirror: tree 1's leaves (odd positions) are tree 2's inner nodes
        return (lambda r: p - 1 - r), (lambda q: p - 1 - q)
    return (lambda r: (r - 1) % p), (lambda q: (q + 1) % p)  # shift


def depth(p: int, r: int) -> int:
    d = 0
    while (r := btree(p, r)[0]) != -1:
        d += 1
    return d


# --8<-- [end:btree]
