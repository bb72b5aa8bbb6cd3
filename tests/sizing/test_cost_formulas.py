"""Tests for snippets.sizing.cost_formulas: every closed form against a schedule
counted message by message, the crossover arithmetic, and the model against the bytes
and rounds our implementations really send."""

from __future__ import annotations

import math

import pytest
import torch
import torch.distributed as dist

from snippets.comm.algorithms import allreduce
from snippets.core.runtime import launch
from snippets.sizing import cost_formulas as cm

M = cm.Machine(alpha=30e-6, beta=0.4e-9, gamma=0.05e-9)  # made-up but realistic machine
N = 3 * 1_000_003.0  # odd buffer size in bytes


# --- an independent oracle: schedules, costed message by message ----------------------
# A step is a list of messages (src, dst, bytes, reduced_bytes) that run concurrently.
# In the model a rank sends one message at a time and receives one at a time, both at
# once (full duplex): a step lasts as long as its busiest port, plus the reduction of
# what arrived.


def step_time(msgs: list[tuple[int, int, float, float]], m: cm.Machine) -> float:
    send: dict[int, float] = {}
    recv: dict[int, float] = {}
    for src, dst, nbytes, reduced in msgs:
        send[src] = send.get(src, 0.0) + m.alpha + nbytes * m.beta
        recv[dst] = recv.get(dst, 0.0) + m.alpha + nbytes * m.beta + reduced * m.gamma
    return max(list(send.values()) + list(recv.values()) + [0.0])


def schedule_time(
    steps: list[list[tuple[int, int, float, float]]], m: cm.Machine
) -> float:
    return sum(step_time(s, m) for s in steps)


def ring_schedule(p: int, n: float) -> list:
    rs = [
        [(r, (r + 1) % p, n / p, n / p) for r in range(p)] for _ in range(p - 1)
    ]  # reduce-scatter
    ag = [
        [(r, (r + 1) % p, n / p, 0.0) for r in range(p)] for _ in range(p - 1)
    ]  # all-gather
    return rs + ag


def naive_root_schedule(p: int, n: float) -> list:
    return [[(r, 0, n, n) for r in range(1, p)], [(0, r, n, 0.0) for r in range(1, p)]]


def naive_everyone_schedule(p: int, n: float) -> list:
    return [[(a, b, n, n) for a in range(p) for b in range(p) if a != b]]


def halving_doubling_schedule(p: int, n: float) -> list:
    q = 1 << (p.bit_length() - 1)
    r = p - q
    steps = (
        [[(q + i, i, n, n) for i in range(r)]] if r else []
    )  # extras hand over their buffer
    size, halving = n, []
    for d in range(q.bit_length() - 1):  # recursive halving: swap half, keep half, add
        size /= 2
        halving.append([(i, i ^ (1 << d), size, size) for i in range(q)])
    doubling = [
        [(i, i ^ (1 << d), s[0][2], 0.0) for i in range(q)]
        for d, s in reversed(list(enumerate(halving)))
    ]
    steps += halving + doubling
    if r:
        steps.append(
            [(i, q + i, n, 0.0) for i in range(r)]
        )  # extras get the result back
    return steps


def nccl_shaped_tree(p: int) -> dict[int, int]:
    """parent of each rank: rank 0 is the root with one child, under it a balanced
    binary tree of ranks 1..p-1 numbered in order (for even p the leaves are odd)."""
    parent = {0: -1}

    def build(lo: int, hi: int, above: int) -> None:
        if lo < hi:
            mid = (lo + hi) // 2
            parent[mid] = above
            build(lo, mid, mid)
            build(mid + 1, hi, mid)

    build(1, p, 0)
    return parent


def depth_of(parent: dict[int, int], r: int) -> int:
    d = 0
    while parent[r] != -1:
        d, r = d + 1, parent[r]
    return d


def pipelined_schedule(trees: list[dict[int, int]], n: float, k: int) -> list:
    """Each tree carries n/len(trees) in k segments, all trees at once. Going up,
    segment j leaves a rank at depth d at stage j + D - d; going down is the mirror."""
    share = n / len(trees) / k
    up: list[list] = []
    for parent in trees:
        depth = {r: depth_of(parent, r) for r in parent}
        d_max = max(depth.values())
        for r, par in parent.items():
            for j in range(k if par != -1 else 0):
                stage = j + d_max - depth[r]
                up += [[] for _ in range(stage + 1 - len(up))]
                up[stage].append((r, par, share, share))
    down = [[(dst, src, b, 0.0) for src, dst, b, _ in stage] for stage in reversed(up)]
    return up + down


@pytest.mark.parametrize("p", [1, 2, 3, 4, 5, 6, 7, 8, 13, 64])
def test_closed_forms_match_their_schedules(p):
    pairs = [
        (cm.ring_cost, ring_schedule),
        (cm.naive_root_cost, naive_root_schedule),
        (cm.naive_everyone_cost, naive_everyone_schedule),
        (cm.halving_doubling_cost, halving_doubling_schedule),
        (cm.ring_reduce_scatter_cost, lambda p, n: ring_schedule(p, n)[: p - 1]),
        (cm.ring_all_gather_cost, lambda p, n: ring_schedule(p, n)[p - 1 :]),
    ]
    for formula, schedule in pairs:
        assert formula(p).time(N, M) == pytest.approx(
            schedule_time(schedule(p, N), M), rel=1e-12
        ), formula.__name__


@pytest.mark.parametrize(
    "p,k",
    [(2, 1), (2, 5), (3, 1), (3, 4), (4, 1), (4, 3), (8, 1), (8, 6), (16, 8), (32, 2)],
)
def test_pipelined_trees_match_their_schedules(p, k):
    tree = nccl_shaped_tree(p)
    mirror = {p - 1 - r: (p - 1 - up if up != -1 else -1) for r, up in tree.items()}
    assert cm.tree_cost(p, k).time(N, M) == pytest.approx(
        schedule_time(pipelined_schedule([tree], N, k), M), rel=1e-12
    )
    if p % 2 == 0:  # mirrored, a leaf of one tree is an inner rank of the other
        inner = [{q for q in t.values() if q != -1} for t in (tree, mirror)]
        assert not inner[0] & inner[1]
        assert cm.double_tree_cost(p, k).time(N, M) == pytest.approx(
            schedule_time(pipelined_schedule([tree, mirror], N, k), M), rel=1e-12
        )


def test_tree_depth_is_that_of_the_trees_we_build():
    from snippets.comm.algorithms import tree_allreduce

    for p in range(1, 70):
        assert (
            cm.tree_depth(p)
            == max(tree_allreduce.depth(p, r) for r in range(p))
            == math.ceil(math.log2(p))
        )
        shape = nccl_shaped_tree(p)
        assert max(depth_of(shape, r) for r in shape) == cm.tree_depth(p)


@pytest.mark.parametrize("p", [3, 5, 8, 64, 1000])
def test_what_the_papers_say(p):
    ring, hd = cm.ring_cost(p), cm.halving_doubling_cost(p)
    lower_bound = (
        2 * (p - 1) / p
    )  # Patarasuk & Yuan 2009: no all-reduce moves less per rank
    for name, fn in cm.FORMULAS.items():
        assert fn(p).beta >= lower_bound - 1e-12, name
    assert ring.beta == pytest.approx(lower_bound) and ring.alpha == 2 * (p - 1)
    lg = math.floor(math.log2(p))
    if p & (p - 1) == 0:  # Rabenseifner meets the bound with 2 lg p start-ups
        assert hd.beta == pytest.approx(lower_bound) and hd.alpha == 2 * lg
    # double binary tree: logarithmic start-ups, with many segments a ring's bandwidth
    big = cm.double_tree_cost(p, 1 << 20)
    assert cm.double_tree_cost(p, 1).alpha <= 4 * (lg + 1)
    assert (
        big.beta <= ring.beta * p / (p - 1) * 1.001
    )  # ≈ 2nβ, what a ring moves as p grows
    assert (
        big.beta < cm.tree_cost(p, 1 << 20).beta
    )  # two trees carrying halves beat one tree


# --- crossover ------------------------------------------------------------------------


@pytest.mark.parametrize("p", [3, 5, 16])
def test_crossover_is_where_two_lines_meet(p):
    a, b = cm.ring_cost(p), cm.naive_everyone_cost(p)
    by_hand = (
        (a.alpha - b.alpha)
        * M.alpha
        / ((b.beta - a.beta) * M.beta + (b.gamma - a.gamma) * M.gamma)
    )
    found = cm.crossover("ring", "naive_everyone", p, M)
    assert found == pytest.approx(by_hand, rel=1e-9)
    assert cm.predict("naive_everyone", p, found / 2, M) < cm.predict(
        "ring", p, found / 2, M
    )
    assert cm.predict("ring", p, found * 2, M) < cm.predict(
        "naive_everyone", p, found * 2, M
    )


def test_no_crossover_when_one_always_wins():
    # p a power of two: Rabenseifner has the ring's bandwidth term and fewer start-ups
    assert cm.crossover("ring", "halving_doubling", 8, M) is None
    assert (
        cm.crossover("ring", "halving_doubling", 6, M) is not None
    )  # extras cost 2 more passes over n


def test_ring_latency_bound_size():
    for p in (2, 3, 8, 100):
        n = cm.ring_latency_bound_below(p, M)
        ring = cm.ring_cost(p)
        assert ring.alpha * M.alpha == pytest.approx(
            n * (ring.beta * M.beta + ring.gamma * M.gamma), rel=1e-12
        )


@pytest.mark.parametrize("name", ["tree", "double_tree"])
@pytest.mark.parametrize("p", [3, 8, 100])
def test_predict_takes_the_best_power_of_two_segments(name, p):
    for n in (64.0, 1e5, 3e7):
        brute = min(
            cm.FORMULAS[name](p, 2**j).time(n, M)
            for j in range(0, 26)
            if 2**j <= max(1, n / 4)
        )
        assert cm.predict(name, p, n, M) == pytest.approx(brute, rel=1e-12)


def test_bad_arguments_raise():
    for bad in (0, -3, 2.5):
        with pytest.raises(ValueError):
            cm.ring_cost(bad)
    with pytest.raises(ValueError):
        cm.tree_cost(4, segments=0)
    with pytest.raises(ValueError, match="unknown algorithm"):
        cm.predict("bogus", 4, 10.0, M)


# --- the model against the implementations' own traces --------------------------------


def _traces(numel: int) -> dict:

    from snippets.comm.algorithms.allreduce import (
        halving_doubling_allreduce,
        ring_allreduce,
    )

    out = {}
    for name, fn in (
        ("ring", ring_allreduce),
        ("halving_doubling", halving_doubling_allreduce),
    ):
        mine: list = []
        fn(
            torch.ones(numel, dtype=torch.float64), trace=mine
        )  # small: one segment per message
        everyone: list = [None] * dist.get_world_size()
        dist.all_gather_object(everyone, mine)
        out[name] = [s for part in everyone for s in part]
    return out


def test_start_ups_and_bytes_match_what_the_algorithms_send():
    """Ring and Rabenseifner (p a power of two) send the same amount from every rank,
    in lock-step rounds: the model's a is the number of rounds and b·n the bytes each
    rank sends."""
    p, numel = 4, 4 * 1000  # divisible, so every chunk is the same size
    traces = launch(_traces, p, backend="gloo", timeout_s=60, args=(numel,))[0]
    n_bytes = numel * 8
    for name, trace in traces.items():
        cost = cm.FORMULAS[name](p)
        assert len({s.step for s in trace}) == cost.alpha, name
        for rank in range(p):
            assert sum(s.nbytes for s in trace if s.src == rank) == pytest.approx(
                cost.beta * n_bytes
            ), (name, rank)


def test_one_formula_per_algorithm_under_the_same_name():
    assert set(cm.FORMULAS) == set(allreduce.ALGORITHMS)
    assert set(cm.PIPELINED) <= set(cm.FORMULAS)
