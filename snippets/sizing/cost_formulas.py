"""What an all-reduce costs in the α-β(-γ) model: one closed form per algorithm.

The model (Hockney; as used by Thakur, Rabenseifner & Gropp 2005): sending a message of
m bytes between two ranks takes ``α + m·β``; reducing m bytes locally takes ``m·γ``. A
rank can send one message and receive one at the same time (full duplex), but its sends
(and its receives) go one after another. Every all-reduce algorithm on n bytes and p
ranks then costs

    T(n) = a·α + b·n·β + c·n·γ

for three numbers (a, b, c) that depend only on p: a :class:`Cost`. ``FORMULAS`` is
keyed by the same names as ``snippets.comm.algorithms.allreduce.ALGORITHMS``. Nothing
here measures: ``snippets.comm.cost.cost_model`` fits α, β, γ on a machine and uses
these.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable


# --8<-- [start:model]
@dataclass(frozen=True)
class Machine:
    alpha: float  # seconds per message (start-up latency)
    beta: float  # seconds per byte on a link (1/β is the bandwidth)
    gamma: float = 0.0  # seconds per byte reduced locally


@dataclass(frozen=True)
class Cost:
    """T(n) = alpha·α + beta·n·β + gamma·n·γ on the critical path, n = buffer bytes."""

    alpha: float
    beta: float
    gamma: float

    def time(self, n_bytes: float, m: Machine) -> float:
        return self.alpha * m.alpha + n_bytes * (
            self.beta * m.beta + self.gamma * m.gamma
        )


# --8<-- [end:model]


def _check_p(p: int) -> None:
    if not isinstance(p, int) or p < 1:
        raise ValueError(f"p must be a positive integer number of ranks, got {p!r}")


def tree_depth(p: int) -> int:
    """Depth of NCCL's binary tree over p ranks (the root has one child): ⌈log2 p⌉."""
    _check_p(p)
    return (p - 1).bit_length()


def _tree_slots(p: int, segments: int) -> int:
    """Messages a busiest rank receives one after another in one pass (up, or down) of
    a pipelined tree: D + k - 1 stages, two children each, except the root's one."""
    if segments < 1:
        raise ValueError(f"segments must be at least 1, got {segments}")
    if p == 1:
        return 0
    fan = 1 if p <= 3 else 2  # up to three ranks the tree is a chain
    return fan * (tree_depth(p) + segments - 2) + 1


# --8<-- [start:formulas]
def naive_root_cost(p: int) -> Cost:
    """Root receives and adds p-1 whole buffers, then sends the sum to p-1 ranks, one
    at a time: 2(p-1)α + 2(p-1)nβ + (p-1)nγ. Latency and bandwidth both grow with p."""
    _check_p(p)
    return Cost(2 * (p - 1), 2 * (p - 1), p - 1)


def naive_everyone_cost(p: int) -> Cost:
    """Every rank sends its whole buffer to the p-1 others (receiving theirs at the
    same time) and adds what arrives: (p-1)α + (p-1)nβ + (p-1)nγ."""
    _check_p(p)
    return Cost(p - 1, p - 1, p - 1)


def ring_cost(p: int) -> Cost:
    """Reduce-scatter then all-gather around a ring, p-1 steps each, n/p bytes a step
    (Patarasuk & Yuan 2009; Thakur et al. 2005 §4.4): 2(p-1)α + 2(p-1)/p·nβ +
    (p-1)/p·nγ. Bandwidth-optimal; the latency term is linear in p."""
    _check_p(p)
    return Cost(2 * (p - 1), 2 * (p - 1) / p, (p - 1) / p)


def tree_cost(p: int, segments: int = 1) -> Cost:
    """Reduce up a binary tree of depth D = ⌈log2 p⌉, then broadcast down it, each pass
    pipelined in k segments (Sanders, Speck & Träff 2009 §2). Segment i leaves depth d
    at stage i + D - d; an inner rank takes its two children's segments one after the
    other, so most stages cost 2α + 2(n/k)β (+ 2(n/k)γ going up): with
    s = 2(D+k-2) + 1 messages per pass, 2sα + 2s/k·nβ + s/k·nγ. For large n and k:
    about 4nβ, twice a ring."""
    _check_p(p)
    s = _tree_slots(p, segments)
    return Cost(2 * s, 2 * s / segments, s / segments)


def double_tree_cost(p: int, segments: int = 1) -> Cost:
    """Two binary trees at once, each carrying n/2 in k segments, every rank inner in
    at most one of them (NCCL 2.4, Jeaugey 2019; Sanders, Speck & Träff 2009): one
    tree's stages with half-size messages: 2sα + s/k·nβ + s/(2k)·nγ. Large n and k:
    about 2nβ, a ring's bandwidth. (With odd p, NCCL's second tree makes one rank
    inner in both; this formula ignores it.)"""
    _check_p(p)
    s = _tree_slots(p, segments)
    return Cost(2 * s, s / segments, s / (2 * segments))


def halving_doubling_cost(p: int) -> Cost:
    """Rabenseifner: reduce-scatter by recursive halving, all-gather by recursive
    doubling (Thakur et al. 2005 §4.4): 2·lg p·α + 2(p-1)/p·nβ + (p-1)/p·nγ for p a
    power of two. Otherwise the r = p - p' extra ranks first hand their buffer to a
    partner (α + nβ + nγ) and get the result back at the end (α + nβ), p' = 2^⌊lg p⌋."""
    _check_p(p)
    lg = p.bit_length() - 1  # ⌊log2 p⌋
    q = 1 << lg  # p', the largest power of two ≤ p
    extra = 0 if q == p else 1
    return Cost(2 * lg + 2 * extra, 2 * (q - 1) / q + 2 * extra, (q - 1) / q + extra)


def ring_all_gather_cost(p: int) -> Cost:
    """All-gather around a ring, n = the gathered size: p-1 steps of n/p bytes (Thakur
    et al. 2005 §4.1): (p-1)α + (p-1)/p·nβ. Half of a ring all-reduce."""
    _check_p(p)
    return Cost(p - 1, (p - 1) / p, 0)


def ring_reduce_scatter_cost(p: int) -> Cost:
    """Reduce-scatter around a ring, n = the input size: p-1 steps of n/p bytes, each
    added on arrival: (p-1)α + (p-1)/p·n(β + γ). The other half of a ring all-reduce."""
    _check_p(p)
    return Cost(p - 1, (p - 1) / p, (p - 1) / p)


COLLECTIVES = {
    "all_gather": ring_all_gather_cost,
    "reduce_scatter": ring_reduce_scatter_cost,
}

# the keys of snippets.comm.algorithms.allreduce.ALGORITHMS, one formula each
FORMULAS: dict[str, Callable[..., Cost]] = {
    "naive_root": naive_root_cost,
    "naive_everyone": naive_everyone_cost,
    "ring": ring_cost,
    "tree": tree_cost,
    "double_tree": double_tree_cost,
    "halving_doubling": halving_doubling_cost,
}
PIPELINED = ("tree", "double_tree")  # their cost depends on the segment count
# --8<-- [end:formulas]


# --8<-- [start:crossover]
def predict(
    name: str, p: int, n_bytes: float, m: Machine, segment_bytes: int | None = None
) -> float:
    """Predicted seconds for algorithm ``name`` on p ranks and n bytes. The pipelined
    trees cut each tree's share into segments of ``segment_bytes``; if None, they get
    their best segment count among powers of two (T(k) = a + b·k + c/k is convex)."""
    if name not in FORMULAS:
        raise ValueError(
            f"unknown algorithm {name!r}: choose one of {', '.join(FORMULAS)}"
        )
    formula = FORMULAS[name]
    if name not in PIPELINED:
        return formula(p).time(n_bytes, m)
    share = n_bytes / 2 if name == "double_tree" else n_bytes
    if segment_bytes is not None:
        k = max(1, math.ceil(share / segment_bytes))
        return formula(p, k).time(n_bytes, m)
    best, k = math.inf, 1
    while k <= max(1.0, share / 4):  # at least one float32 per segment
        t = formula(p, k).time(n_bytes, m)
        if t > best:
            break
        best, k = t, 2 * k
    return best


def crossover(
    a: str, b: str, p: int, m: Machine, lo: float = 1.0, hi: float = 2.0**40
) -> float | None:
    """The first buffer size in [lo, hi] bytes where ``a`` and ``b`` swap places
    (bisection on log n), or None if one of them is faster over the whole range."""

    def diff(n: float) -> float:
        return predict(a, p, n, m) - predict(b, p, n, m)

    grid = [lo * 2.0**i for i in range(int(math.log2(hi / lo)) + 1)]
    for left, right in zip(grid, grid[1:]):
        if (diff(left) < 0) != (diff(right) < 0):
            for _ in range(60):
                mid = math.sqrt(left * right)
                same = (diff(mid) < 0) == (diff(left) < 0)
                left, right = (mid, right) if same else (left, mid)
            return math.sqrt(left * right)
    return None


def ring_latency_bound_below(p: int, m: Machine) -> float:
    """The size under which the ring's 2(p-1)α exceeds its (p-1)/p·n(2β+γ):
    n = 2pα/(2β+γ)."""
    _check_p(p)
    return 2 * p * m.alpha / (2 * m.beta + m.gamma)


# --8<-- [end:crossover]


def size_text(n: float) -> str:
    """Bytes for a reader: '8 B', '1.5 KiB', '64 MiB'."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            digits = ".3g" if n < 1000 * scale else ".0f"
            return f"{n / scale:{digits}} {unit}"
    return f"{n:.3g} B"
