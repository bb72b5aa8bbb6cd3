"""Tree and double binary tree: shapes (depth ⌈log2 p⌉, a valid tree, complementary
roles) checked for p = 1…16 without any process, then traces against the theory on 3
and 6 ranks."""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist

from snippets.comm.algorithms import binary_trees as B
from snippets.comm.algorithms import tree_allreduce as T
from snippets.core.runtime import launch

N = 1001


@pytest.mark.parametrize("p", range(1, 17))
def test_btree_is_a_tree_of_depth_ceil_log2_p(p: int) -> None:
    for which in (0, 1):
        pos, rank_at = B.tree_of(p, which)
        parents = {r: B.btree(p, pos(r))[0] for r in range(p)}
        assert sorted(rank_at(pos(r)) for r in range(p)) == list(range(p))
        assert sum(par == -1 for par in parents.values()) == 1  # one root
        for r in range(p):  # parent and child lists agree
            for c in B.btree(p, pos(r))[1]:
                assert B.btree(p, c)[0] == pos(r)
            assert len(B.btree(p, pos(r))[1]) <= 2
    assert max(B.depth(p, r) for r in range(p)) == (p - 1).bit_length()


@pytest.mark.parametrize("p", range(2, 17))
def test_every_rank_is_inner_in_at_most_one_tree(p: int) -> None:
    inner_in_both = [
        r for r in range(p) if all(B.btree(p, B.tree_of(p, w)[0](r))[1] for w in (0, 1))
    ]
    assert len(inner_in_both) == (0 if p % 2 == 0 else 1) or (
        p == 3 and len(inner_in_both) <= 1
    ), inner_in_both


def traces_rank() -> dict:
    p = dist.get_world_size()
    out = {}
    for fn in (T.tree_allreduce, T.double_tree_allreduce):
        x = torch.ones(N, dtype=torch.float64)
        trace: list = []
        fn(x, trace=trace)
        assert torch.equal(x, torch.full((N,), float(p), dtype=torch.float64))
        out[fn.__name__] = trace
    out["main"] = T.main(2003)
    return out


@pytest.fixture(scope="module", params=[3, 6])
def run(request: pytest.FixtureRequest) -> tuple[int, list[dict]]:
    return request.param, launch(
        traces_rank, request.param, backend="gloo", timeout_s=60
    )


def test_trace_depth_and_steps(run: tuple[int, list[dict]]) -> None:
    p, per_rank = run
    D = (p - 1).bit_length()
    sends = [s for r in per_rank for s in r["tree_allreduce"]]
    parent = {s.src: s.dst for s in sends if s.phase == "reduce"}
    assert (
        len(parent) == p - 1
    )  # every rank but the root sends up exactly once (one segment)

    def depth(r: int) -> int:
        return 0 if r not in parent else 1 + depth(parent[r])

    assert max(depth(r) for r in range(p)) == D
    assert len({s.step for s in sends}) == 2 * D  # up and down, one segment: 2·⌈log2 p⌉
    double = [s for r in per_rank for s in r["double_tree_allreduce"]]
    assert (
        len({s.step for s in double}) == 2 * D
    )  # both trees in parallel: still logarithmic


def test_double_tree_sends_about_what_a_ring_sends(run: tuple[int, list[dict]]) -> None:
    p, per_rank = run
    ring = 2 * (p - 1) / p * N * 8
    single = {r: sum(s.nbytes for s in per_rank[r]["tree_allreduce"]) for r in range(p)}
    double = {
        r: sum(s.nbytes for s in per_rank[r]["double_tree_allreduce"]) for r in range(p)
    }
    assert max(double.values()) <= 2 * N * 8 + 16  # ≤ p/(p−1) × the ring's 2(p−1)/p · n
    assert max(double.values()) <= ring * p / (p - 1) + 16
    # one tree has a node with two children: it sends n up and 2n down; two trees less
    if p >= 4:
        assert max(single.values()) == 3 * N * 8
        assert max(double.values()) < max(single.values())


def test_main(run: tuple[int, list[dict]]) -> None:
    p, per_rank = run
    assert per_rank[0]["main"]["depth"] == (p - 1).bit_length()
