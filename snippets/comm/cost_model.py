"""Latency matters: what an all-reduce costs in the α-β(-γ) model, with α and β measured here.

The model (Hockney; as used by Thakur, Rabenseifner & Gropp 2005): sending a message of m
bytes between two ranks takes ``α + m·β``; reducing m bytes locally takes ``m·γ``. A rank can
send one message and receive one at the same time (full duplex), but its sends (and its
receives) go one after another. Every all-reduce algorithm on n bytes and p ranks then costs

    T(n) = a·α + b·n·β + c·n·γ

for three numbers (a, b, c) that depend only on p: a :class:`Cost`. Fit α and β from a
ping-pong between two ranks, γ from a local add, and the formulas predict every algorithm
on every size, and where one overtakes another.

    python -m snippets.comm.cost_model                   # 2 local ranks, gloo on a CPU
    torchrun --nproc-per-node 2 -m snippets.comm.cost_model
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
import torch
import torch.distributed as dist

from snippets.core.cli import main_entry
from snippets.core.measure import time_it
from snippets.core.runtime import Spec, device, print0
from snippets.core.svg import line_chart

SPEC = Spec(
    summary="α-β(-γ) costs of all-reduce algorithms, α and β fitted on this machine",
    world_size=2,
    min_world_size=2,
)


# --8<-- [start:model]
@dataclass(frozen=True)
class Machine:
    alpha: float  # seconds per message (start-up latency)
    beta: float  # seconds per byte on a link (1/β is the bandwidth)
    gamma: float = 0.0  # seconds per byte reduced locally


@dataclass(frozen=True)
class Cost:
    """T(n) = alpha·α + beta·n·β + gamma·n·γ on the critical path, n = bytes of the buffer."""

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
    """Messages a busiest rank receives one after another in one pass (up, or down) of a
    pipelined tree: D + k - 1 stages, two children each, except the root's single child."""
    if segments < 1:
        raise ValueError(f"segments must be at least 1, got {segments}")
    if p == 1:
        return 0
    fan = 1 if p <= 3 else 2  # up to three ranks the tree is a chain
    return fan * (tree_depth(p) + segments - 2) + 1


# --8<-- [start:formulas]
def naive_reduce_broadcast_cost(p: int) -> Cost:
    """Root receives and adds p-1 whole buffers, then sends the sum to p-1 ranks, one at a time:
    2(p-1)α + 2(p-1)nβ + (p-1)nγ. Both the latency and the bandwidth terms grow with p."""
    _check_p(p)
    return Cost(2 * (p - 1), 2 * (p - 1), p - 1)


def naive_all_to_all_cost(p: int) -> Cost:
    """Every rank sends its whole buffer to the p-1 others (receiving theirs at the same time)
    and adds what arrives: (p-1)α + (p-1)nβ + (p-1)nγ."""
    _check_p(p)
    return Cost(p - 1, p - 1, p - 1)


def ring_cost(p: int) -> Cost:
    """Reduce-scatter then all-gather around a ring, p-1 steps each, n/p bytes a step
    (Patarasuk & Yuan 2009, eq. for T_ring; Thakur et al. 2005 §4.4):
    2(p-1)α + 2(p-1)/p·nβ + (p-1)/p·nγ. Bandwidth-optimal; the latency term is linear in p."""
    _check_p(p)
    return Cost(2 * (p - 1), 2 * (p - 1) / p, (p - 1) / p)


def tree_cost(p: int, segments: int = 1) -> Cost:
    """Reduce up a binary tree of depth D = ⌈log2 p⌉, then broadcast down it, each pass
    pipelined in k segments (Sanders, Speck & Träff 2009 §2). Segment i leaves depth d at stage
    i + D - d; an inner rank takes its two children's segments one after the other, so most
    stages cost 2α + 2(n/k)β (+ 2(n/k)γ going up): with s = 2(D+k-2) + 1 messages per pass,
    2sα + 2s/k·nβ + s/k·nγ. For large n and k: about 4nβ, twice a ring."""
    _check_p(p)
    s = _tree_slots(p, segments)
    return Cost(2 * s, 2 * s / segments, s / segments)


def double_tree_cost(p: int, segments: int = 1) -> Cost:
    """Two binary trees at once, each carrying n/2 in k segments, every rank inner in at most
    one of them (NCCL 2.4, Jeaugey 2019; Sanders, Speck & Träff 2009): the same stages as one
    tree, but each message is half as big: 2sα + s/k·nβ + s/(2k)·nγ. For large n and k:
    about 2nβ, a ring's bandwidth. (With odd p, NCCL's second tree makes one rank inner in
    both; this formula ignores it.)"""
    _check_p(p)
    s = _tree_slots(p, segments)
    return Cost(2 * s, s / segments, s / (2 * segments))


def halving_doubling_cost(p: int) -> Cost:
    """Rabenseifner: reduce-scatter by recursive halving, all-gather by recursive doubling
    (Thakur et al. 2005 §4.4): 2·lg p·α + 2(p-1)/p·nβ + (p-1)/p·nγ for p a power of two.
    Otherwise the r = p - p' extra ranks first hand their buffer to a partner (α + nβ + nγ)
    and get the result back at the end (α + nβ), p' = 2^⌊lg p⌋."""
    _check_p(p)
    lg = p.bit_length() - 1  # ⌊log2 p⌋
    q = 1 << lg  # p', the largest power of two ≤ p
    extra = 0 if q == p else 1
    return Cost(2 * lg + 2 * extra, 2 * (q - 1) / q + 2 * extra, (q - 1) / q + extra)


def ring_all_gather_cost(p: int) -> Cost:
    """All-gather around a ring, n = the gathered size: p-1 steps of n/p bytes (Thakur et al.
    2005 §4.1): (p-1)α + (p-1)/p·nβ. Half of a ring all-reduce."""
    _check_p(p)
    return Cost(p - 1, (p - 1) / p, 0)


def ring_reduce_scatter_cost(p: int) -> Cost:
    """Reduce-scatter around a ring, n = the input size: p-1 steps of n/p bytes, each added on
    arrival: (p-1)α + (p-1)/p·n(β + γ). The other half of a ring all-reduce."""
    _check_p(p)
    return Cost(p - 1, (p - 1) / p, (p - 1) / p)


COLLECTIVES = {
    "all_gather": ring_all_gather_cost,
    "reduce_scatter": ring_reduce_scatter_cost,
}

ALGORITHMS: dict[str, Callable[[int], Cost]] = {
    "naive_reduce_broadcast": naive_reduce_broadcast_cost,
    "naive_all_to_all": naive_all_to_all_cost,
    "ring": ring_cost,
    "tree": tree_cost,
    "double_tree": double_tree_cost,
    "halving_doubling": halving_doubling_cost,
}
# --8<-- [end:formulas]


# --8<-- [start:crossover]
def predict(
    name: str, p: int, n_bytes: float, m: Machine, segment_bytes: int | None = None
) -> float:
    """Predicted seconds for algorithm ``name`` on p ranks and n bytes. The pipelined trees cut
    each tree's share into segments of ``segment_bytes``; if None, they get their best segment
    count among powers of two (T(k) = a + b·k + c/k is convex in k)."""
    if name not in ALGORITHMS:
        raise ValueError(
            f"unknown algorithm {name!r}: choose one of {', '.join(ALGORITHMS)}"
        )
    if name not in ("tree", "double_tree"):
        return ALGORITHMS[name](p).time(n_bytes, m)
    share = n_bytes / 2 if name == "double_tree" else n_bytes
    if segment_bytes is not None:
        return ALGORITHMS[name](p, max(1, math.ceil(share / segment_bytes))).time(
            n_bytes, m
        )  # type: ignore[call-arg]
    best, k = math.inf, 1
    while k <= max(1.0, share / 4):  # at least one float32 per segment
        t = ALGORITHMS[name](p, k).time(n_bytes, m)  # type: ignore[call-arg]
        if t > best:
            break
        best, k = t, 2 * k
    return best


def crossover(
    a: str, b: str, p: int, m: Machine, lo: float = 1.0, hi: float = 2.0**40
) -> float | None:
    """The first buffer size in [lo, hi] bytes where ``a`` and ``b`` swap places (bisection on
    log n), or None if one of them is faster over the whole range."""

    def diff(n: float) -> float:
        return predict(a, p, n, m) - predict(b, p, n, m)

    grid = [lo * 2.0**i for i in range(int(math.log2(hi / lo)) + 1)]
    for left, right in zip(grid, grid[1:]):
        if (diff(left) < 0) != (diff(right) < 0):
            for _ in range(60):
                mid = math.sqrt(left * right)
                left, right = (
                    (mid, right) if (diff(mid) < 0) == (diff(left) < 0) else (left, mid)
                )
            return math.sqrt(left * right)
    return None


def ring_latency_bound_below(p: int, m: Machine) -> float:
    """The size under which the ring's 2(p-1)α exceeds its (p-1)/p·n(2β+γ): n = 2pα/(2β+γ)."""
    _check_p(p)
    return 2 * p * m.alpha / (2 * m.beta + m.gamma)


# --8<-- [end:crossover]


# --8<-- [start:fit]
def fit_line(sizes: Sequence[float], seconds: Sequence[float]) -> tuple[float, float]:
    """Least squares for t = c0 + c1·m, each point weighted by 1/t: the relative error counts,
    so a 10 µs start-up is not drowned by the 10 ms of a large message. Returns (c0, c1)."""
    m, t = np.asarray(sizes, dtype=np.float64), np.asarray(seconds, dtype=np.float64)
    if m.ndim != 1 or m.shape != t.shape or len(m) < 2 or len(set(m.tolist())) < 2:
        raise ValueError(
            "fit_line needs at least two points at different sizes, as equal-length 1-D lists"
        )
    if np.any(t <= 0) or np.any(m < 0):
        raise ValueError("fit_line needs positive times and non-negative sizes")
    design = np.stack([np.ones_like(m), m], axis=1) / t[:, None]  # (points, 2)
    (c0, c1), *_ = np.linalg.lstsq(design, np.ones_like(t), rcond=None)
    return float(c0), float(c1)


# --8<-- [end:fit]


# --8<-- [start:measure]
def ping_pong(
    sizes: Sequence[int], iters: int = 15, group: dist.ProcessGroup | None = None
) -> list[float]:
    """Half the round-trip time of m bytes between ranks 0 and 1 (α + mβ), for each m.
    Every rank of the group must call it; the others only keep the timer's barriers."""
    rank, dev = dist.get_rank(group), device()
    first, second = (
        (0, 1)
        if group is None
        else (dist.get_global_rank(group, 0), dist.get_global_rank(group, 1))
    )
    out = []
    for size in sizes:
        buf = torch.empty(size, dtype=torch.uint8, device=dev)  # (m,) raw bytes

        def once() -> None:
            if rank == 0:
                dist.send(buf, second, group)
                dist.recv(buf, second, group)
            elif rank == 1:
                dist.recv(buf, first, group)
                dist.send(buf, first, group)

        out.append(time_it(once, warmup=2, iters=iters, device=dev, group=group) / 2)
    return out


def reduce_time(sizes: Sequence[int], iters: int = 9) -> list[float]:
    """Seconds to add m bytes of float32 into another buffer on this rank (m·γ)."""
    dev, out = device(), []
    for size in sizes:
        a = torch.zeros(max(1, size // 4), device=dev)  # (m/4,) float32
        b = torch.zeros_like(a)
        out.append(
            time_it(lambda: a.add_(b), warmup=2, iters=iters, device=dev, group=None)
        )
    return out


def ring_exchange(
    sizes: Sequence[int], iters: int = 9, group: dist.ProcessGroup | None = None
) -> list[float]:
    """Seconds for one ring step: every rank sends m bytes to its right and receives m from its
    left, all at once. Unlike a ping-pong, every rank is busy, as in a real collective."""
    ranks, dev = dist.get_process_group_ranks(group or dist.group.WORLD), device()
    me, p = dist.get_rank(group), len(ranks)
    out = []
    for size in sizes:
        send_buf = torch.empty(size, dtype=torch.uint8, device=dev)  # (m,)
        recv_buf = torch.empty_like(send_buf)

        def once() -> None:
            works = [
                dist.isend(send_buf, ranks[(me + 1) % p], group),
                dist.irecv(recv_buf, ranks[(me - 1) % p], group),
            ]
            for w in works:
                w.wait()

        out.append(time_it(once, warmup=2, iters=iters, device=dev, group=group))
    return out


def measure_machine(
    sizes: Sequence[int] | None = None,
    group: dist.ProcessGroup | None = None,
    pattern: str = "ping_pong",
) -> tuple[Machine, dict]:
    """Fit α, β to a sweep of ``pattern`` ("ping_pong" between ranks 0 and 1, or "ring": all
    ranks at once) and γ to a local-add sweep; also return the raw samples."""
    if pattern not in ("ping_pong", "ring"):
        raise ValueError(f"unknown pattern {pattern!r}: use 'ping_pong' or 'ring'")
    sizes = list(sizes or [2**e for e in range(3, 25, 2)])  # 8 B … 8 MiB
    t_net = (ping_pong if pattern == "ping_pong" else ring_exchange)(sizes, group=group)
    t_add = reduce_time(sizes)
    alpha, beta = fit_line(sizes, t_net)
    _, gamma = fit_line(sizes, t_add)
    return Machine(alpha, beta, max(gamma, 0.0)), {
        "sizes": sizes,
        f"{pattern}_s": t_net,
        "reduce_s": t_add,
    }


# --8<-- [end:measure]


def _size(n: float) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return (
                f"{n / scale:.3g} {unit}"
                if n < 1000 * scale
                else f"{n / scale:.0f} {unit}"
            )
    return f"{n:.3g} B"


def latency_tables(m: Machine) -> tuple[list[dict], list[dict]]:
    """Where the ring is latency-bound, for growing p; where it overtakes the others."""
    ring_rows, cross_rows = [], []
    for p in (2, 4, 8, 16, 64, 256, 1024):
        ring = ring_cost(p)
        ring_rows.append(
            {
                "p": p,
                "ring latency 2(p-1)α": f"{ring.alpha * m.alpha * 1e3:.3g} ms",
                "latency-bound below": _size(ring_latency_bound_below(p, m)),
                "latency share at 1 MiB": f"{ring.alpha * m.alpha / ring.time(2**20, m):.0%}",
            }
        )
    for p in (4, 6, 8, 16, 64, 256, 1024):
        row: dict = {"p": p}
        for other in ("naive_all_to_all", "double_tree", "halving_doubling"):
            n_x = crossover("ring", other, p, m)
            small = (
                "ring" if predict("ring", p, 4, m) < predict(other, p, 4, m) else other
            )
            big = other if small == "ring" else "ring"
            row[f"ring vs {other}"] = (
                f"{small} always"
                if n_x is None
                else f"{small} below {_size(n_x)}, {big} above"
            )
        cross_rows.append(row)
    return ring_rows, cross_rows


def main() -> dict:
    m, raw = measure_machine()
    sizes, t_net = raw["sizes"], raw["ping_pong_s"]
    predicted = [m.alpha + s * m.beta for s in sizes]
    errors = [abs(p - t) / t for p, t in zip(predicted, t_net)]
    median_error = sorted(errors)[len(errors) // 2]
    # the oracle is the measurement itself: the fitted line must explain the ping-pong it came from
    assert m.alpha > 0 and m.beta > 0, (
        f"fit gave α={m.alpha:.3g} s, β={m.beta:.3g} s/B: not a latency, a bandwidth"
    )
    assert median_error < 0.5, (
        f"α + mβ misses the median ping-pong size by {median_error:.0%}"
    )
    print0(
        f"α = {m.alpha * 1e6:.1f} µs   β = {m.beta * 1e9:.3f} ns/B ({1 / m.beta / 1e9:.2f} GB/s)   "
        f"γ = {m.gamma * 1e9:.3f} ns/B ({1 / max(m.gamma, 1e-30) / 1e9:.2f} GB/s of adds)"
    )
    print0(f"fit: median error {median_error:.0%} over {len(sizes)} ping-pong sizes")
    ping = [
        {
            "size": _size(s),
            "measured_us": t * 1e6,
            "alpha_beta_us": p * 1e6,
            "error": f"{e:.0%}",
        }
        for s, t, p, e in zip(sizes, t_net, predicted, errors)
    ]
    ring_rows, cross_rows = latency_tables(m)
    for row in ring_rows:
        print0(
            f"  p={row['p']:>4}: ring pays {row['ring latency 2(p-1)α']:>9} in latency; latency-bound below "
            f"{row['latency-bound below']:>10}; at 1 MiB latency is {row['latency share at 1 MiB']}"
        )

    curve = [2**e for e in range(3, 29)]
    chart = line_chart(
        {
            "measured ping-pong": list(zip(sizes, t_net)),
            "α + mβ (fit)": [(s, m.alpha + s * m.beta) for s in curve],
        },
        title="Ping-pong between two ranks: half the round trip",
        x_label="message size (bytes)",
        y_label="seconds",
        log_x=True,
        log_y=True,
        dashed=["α + mβ (fit)"],
    )
    p_show = 64
    short = {
        "naive_reduce_broadcast": "naive (root)",
        "naive_all_to_all": "naive (all)",
        "double_tree": "double tree",
        "halving_doubling": "halv-doubl",
    }  # legend labels that fit
    predicted_chart = line_chart(
        {
            short.get(name, name): [(s, predict(name, p_show, s, m)) for s in curve]
            for name in ALGORITHMS
        },
        title=f"Predicted all-reduce time on {p_show} ranks with this machine's α, β, γ",
        x_label="buffer size n (bytes)",
        y_label="seconds",
        log_x=True,
        log_y=True,
    )
    return {
        "alpha_s": m.alpha,
        "beta_s_per_byte": m.beta,
        "gamma_s_per_byte": m.gamma,
        **raw,
        "tables": {
            "pingpong": ping,
            "ring_latency": ring_rows,
            "crossover": cross_rows,
        },
        "figures": {"pingpong_plot": chart, "predicted_plot": predicted_chart},
    }


if __name__ == "__main__":
    raise SystemExit(main_entry(main, SPEC))
