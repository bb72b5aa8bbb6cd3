"""NCCL's binary trees against trees drawn by hand for p = 5 and p = 8."""

from __future__ import annotations

import pytest

from snippets.comm.algorithms import binary_trees as B

# Drawn by hand from the rule "clear the lowest set bit, set the next one up".
TREE_8 = {
    0: (-1, [4]),
    4: (0, [2, 6]),
    2: (4, [1, 3]),
    6: (4, [5, 7]),
    1: (2, []),
    3: (2, []),
    5: (6, []),
    7: (6, []),
}
TREE_5 = {0: (-1, [4]), 4: (0, [2]), 2: (4, [1, 3]), 1: (2, []), 3: (2, [])}


@pytest.mark.parametrize("p, tree", [(8, TREE_8), (5, TREE_5)])
def test_btree_matches_the_hand_drawn_tree(p: int, tree: dict) -> None:
    assert {r: B.btree(p, r) for r in range(p)} == tree


@pytest.mark.parametrize("p, tree", [(8, TREE_8), (5, TREE_5)])
def test_depth_counts_hops_to_the_root(p: int, tree: dict) -> None:
    def hops(r: int) -> int:  # walk the hand-drawn parents
        return 0 if tree[r][0] == -1 else 1 + hops(tree[r][0])

    assert [B.depth(p, r) for r in range(p)] == [hops(r) for r in range(p)]


def test_small_trees() -> None:
    assert B.btree(1, 0) == (-1, [])
    assert [B.btree(2, r) for r in range(2)] == [(-1, [1]), (0, [])]
    assert [B.btree(3, r) for r in range(3)] == [(-1, [2]), (2, []), (0, [1])]


@pytest.mark.parametrize(
    "p, which, positions",
    [(6, 0, [0, 1, 2, 3, 4, 5]), (6, 1, [5, 4, 3, 2, 1, 0]), (5, 1, [4, 0, 1, 2, 3])],
)
def test_tree_of_mirrors_even_and_shifts_odd(
    p: int, which: int, positions: list[int]
) -> None:
    pos, rank_at = B.tree_of(p, which)
    assert [pos(r) for r in range(p)] == positions
    assert [rank_at(q) for q in positions] == list(range(p))
