"""A topology model: what each link of ``nvidia-smi topo -m`` is worth, which ring
to run all-reduce on, which GPUs belong in one tensor-parallel group, and the busbw to
expect.

It works on a plain matrix ``w[i][j]`` of nominal per-direction bandwidths (GB/s)
between GPU i and GPU j, so it knows nothing of the parser; ``topology`` builds the
matrix from a parsed one. Nominal means the spec sheet: no contention, no protocol
overhead, one pair at a time.

    python -m snippets run topology_model  # the table; best ring checked by brute force
"""

from __future__ import annotations

import itertools
import random
from typing import Sequence

from snippets.core.claims import law
from snippets.core.cli import main_entry
from snippets.core.measure import busbw
from snippets.core.runtime import Spec, print0

SPEC = Spec(
    summary="nominal link bandwidths, best ring order, TP groups, predicted ring busbw"
)

# --8<-- [start:bandwidths]
# PCIe ×16, per direction, after line coding: 3.0 is 8 GT/s with 128b/130b → 16 lanes
# × 8e9 × 128/130 / 8 bits ≈ 15.75 GB/s; 4.0 and 5.0 double it (PCI-SIG base specs).
PCIE_X16_GBPS = {3: 15.75, 4: 31.5, 5: 63.0}

# One NVLink, per direction. P100 whitepaper: 4 links, 160 GB/s both ways → 20 GB/s.
# V100 (NVLink 2): 6 links, 300 GB/s → 25. A100 (NVLink 3): 12 links, 600 GB/s → 25.
# H100 (NVLink 4): 18 links, 900 GB/s → 25. B200 (NVLink 5): 18 links, 1.8 TB/s → 50.
NVLINK_GBPS_PER_LINK = {1: 20.0, 2: 25.0, 3: 25.0, 4: 25.0, 5: 50.0}

PCIE_CODES = (
    "PIX",
    "PXB",
    "PHB",
    "NODE",
    "SYS",
    "SOC",
)  # SOC: older drivers' name for SYS


def link_bandwidth(code: str, *, pcie_gen: int = 4, nvlink_gen: int = 3) -> float:
    """Nominal GB/s per direction of one ``nvidia-smi topo -m`` cell between two GPUs.

    ``NV#`` is # bonded links, each worth ``NVLINK_GBPS_PER_LINK[gen]``. On an NVSwitch
    box (DGX A100: NV12, DGX H100: NV18) every pair shows all of a GPU's links, because
    each pair can use them all through the switches: right for a ring, where each GPU
    sends to one neighbour at a time. Every PCIe path (PIX … SYS) is capped by the
    GPU's ×16 slot; the farther ones (through the CPU, across sockets) only ever do
    worse in practice.
    """
    for name, gen, table in (
        ("pcie_gen", pcie_gen, PCIE_X16_GBPS),
        ("nvlink_gen", nvlink_gen, NVLINK_GBPS_PER_LINK),
    ):
        if gen not in table:
            raise ValueError(f"{name} must be one of {sorted(table)}, got {gen!r}")
    if code.startswith("NV") and code[2:].isdigit() and int(code[2:]) > 0:
        return int(code[2:]) * NVLINK_GBPS_PER_LINK[nvlink_gen]
    if code in PCIE_CODES:
        return PCIE_X16_GBPS[pcie_gen]
    raise ValueError(
        f"no bandwidth for link code {code!r}: expected NV#, PIX, PXB, PHB, NODE or SYS"
    )


# --8<-- [end:bandwidths]


def _check_matrix(w: Sequence[Sequence[float]]) -> int:
    n = len(w)
    if n < 2 or any(len(row) != n for row in w):
        raise ValueError(
            "need a square matrix of at least 2×2 link bandwidths, "
            f"got {n} rows of lengths {[len(r) for r in w]}"
        )
    return n


# --8<-- [start:ring]
def ring_links(ring: Sequence[int], w: Sequence[Sequence[float]]) -> list[float]:
    """Bandwidth of each hop of the ring, the closing hop (last → first) included."""
    return [w[a][b] for a, b in zip(ring, list(ring[1:]) + [ring[0]])]


def best_ring(w: Sequence[Sequence[float]], max_gpus: int = 10) -> list[int]:
    """The ring order that maximises its slowest link (ties: the most total bandwidth).

    A ring all-reduce moves the same bytes over every hop, so the slowest hop sets the
    pace. Brute force, but only over distinct rings: a ring has no start (fix GPU 0
    first) and no direction (keep the orders whose second GPU is below its last), which
    leaves (n-1)!/2 orders, 2,520 for 8 GPUs.
    """
    n = _check_matrix(w)
    if n > max_gpus:
        raise ValueError(
            f"best_ring searches (n-1)!/2 rings; {n} GPUs is too many "
            f"(at most {max_gpus})"
        )
    if n <= 3:
        return list(range(n))  # only one ring exists
    best, best_key = None, None
    for rest in itertools.permutations(range(1, n)):
        if rest[0] > rest[-1]:
            continue  # the same ring walked backwards
        hops = ring_links((0,) + rest, w)
        key = (min(hops), sum(hops))
        if best_key is None or key > best_key:
            best, best_key = [0, *rest], key
    return best


# --8<-- [end:ring]


# --8<-- [start:tp]
def tp_groups(w: Sequence[Sequence[float]], size: int) -> list[list[int]]:
    """Split the GPUs into groups of ``size`` for tensor parallelism.

    TP all-reduces activations inside its group every layer (Megatron-LM, Shoeybi et al.
    2019, §3), so every pair in a group should be fast: maximise the slowest link inside
    any group (ties: the most bandwidth inside groups). Brute force over set partitions.
    """
    n = _check_matrix(w)
    if size < 1 or n % size:
        raise ValueError(f"group size must divide the {n} GPUs, got {size}")

    def partitions(left: tuple[int, ...]):
        if not left:
            yield []
            return
        first, rest = left[0], left[1:]
        for mates in itertools.combinations(rest, size - 1):
            group = (first, *mates)
            for tail in partitions(tuple(g for g in rest if g not in mates)):
                yield [list(group), *tail]

    def key(groups: list[list[int]]) -> tuple[float, float]:
        inside = [w[a][b] for g in groups for a, b in itertools.combinations(g, 2)]
        return (min(inside), sum(inside)) if inside else (0.0, 0.0)

    return max(partitions(tuple(range(n))), key=key)


# --8<-- [end:tp]


# --8<-- [start:predict]
def ring_allreduce_seconds(
    size_bytes: int, n: int, link_gbps: float, latency_s: float = 0.0
) -> float:
    """Alpha-beta time of a ring all-reduce (Patarasuk & Yuan 2009): 2(n-1) steps, each
    sending S/n bytes over the slowest hop: t = 2(n-1)·α + 2(n-1)/n · S / B."""
    return 2 * (n - 1) * latency_s + 2 * (n - 1) / n * size_bytes / (link_gbps * 1e9)


def predicted_busbw(
    w: Sequence[Sequence[float]], ring: Sequence[int], size_bytes: int = 1 << 30
) -> float:
    """nccl-tests busbw (GB/s) of a bandwidth-bound ring all-reduce over ``ring``: it
    comes out as the slowest hop's bandwidth, which is why nccl-tests defines it so."""
    slowest = min(ring_links(ring, w))
    t = ring_allreduce_seconds(size_bytes, len(ring), slowest)
    return busbw(size_bytes, t, len(ring)) / 1e9


# --8<-- [end:predict]


def random_matrix(
    n: int, rng: random.Random, choices: Sequence[float] = (15.75, 31.5, 50.0, 100.0)
) -> list[list[float]]:
    """A symmetric matrix of link bandwidths drawn from ``choices`` (for checks)."""
    w = [[0.0] * n for _ in range(n)]
    for i, j in itertools.combinations(range(n), 2):
        w[i][j] = w[j][i] = rng.choice(choices)
    return w


def brute_force_ring_key(w: Sequence[Sequence[float]]) -> tuple[float, float]:
    """Oracle: the best (slowest hop, total) over all n! orders, no shortcuts."""
    return max(
        (min(h), sum(h))
        for h in (ring_links(p, w) for p in itertools.permutations(range(len(w))))
    )


def main() -> dict:
    rows = [
        {"link": f"PCIe {g}.0 ×16", "GB/s per direction": bw}
        for g, bw in PCIE_X16_GBPS.items()
    ]
    rows += [
        {"link": f"NVLink {g} (one link)", "GB/s per direction": bw}
        for g, bw in NVLINK_GBPS_PER_LINK.items()
    ]
    rows += [
        {
            "link": "NV12 (A100, NVLink 3)",
            "GB/s per direction": link_bandwidth("NV12", nvlink_gen=3),
        },
        {
            "link": "NV18 (H100, NVLink 4)",
            "GB/s per direction": link_bandwidth("NV18", nvlink_gen=4),
        },
    ]
    print0("nominal per-direction bandwidth:")
    for r in rows:
        print0(f"  {r['link']:<24} {r['GB/s per direction']:7.2f} GB/s")

    rng, checked = random.Random(0), 0
    for n in (3, 4, 5, 6, 7):
        for _ in range(6):
            w = random_matrix(n, rng)
            ring = best_ring(w)
            hops = ring_links(ring, w)
            law(sorted(ring) == list(range(n)), f"not a ring of all {n} GPUs: {ring}")
            law(
                (min(hops), sum(hops)) == brute_force_ring_key(w),
                f"ring {ring} is not optimal for {w}",
            )
            law(
                abs(predicted_busbw(w, ring) - min(hops)) < 1e-9,
                "the predicted bus bandwidth is the ring's slowest hop",
            )
            checked += 1
    print0(
        f"best_ring matched brute force over all n! orders on {checked} random "
        "topologies (n = 3…7) ✓"
    )
    return {"tables": {"bandwidths": rows}, "rings_checked": checked}


if __name__ == "__main__":
    raise SystemExit(main_entry(main, SPEC))
