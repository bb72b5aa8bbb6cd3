"""The topology model: ring and TP groups against brute force; bandwidths; busbw."""

from __future__ import annotations

import itertools
import random

import pytest

from snippets.core.measure import busbw
from snippets.hardware.topology_model import (
    NVLINK_GBPS_PER_LINK,
    PCIE_X16_GBPS,
    best_ring,
    brute_force_ring_key,
    link_bandwidth,
    main,
    predicted_busbw,
    random_matrix,
    ring_allreduce_seconds,
    ring_links,
    tp_groups,
)


@pytest.mark.parametrize("n", [2, 3, 4, 5, 6, 7, 8])
def test_best_ring_matches_brute_force(n: int) -> None:
    rng = random.Random(n)
    for _ in range(3 if n == 8 else 10):
        w = random_matrix(n, rng, choices=(1.0, 2.0, 3.0, 5.0, 8.0))
        ring = best_ring(w)
        assert sorted(ring) == list(range(n)) and ring[0] == 0
        hops = ring_links(ring, w)
        assert (min(hops), sum(hops)) == brute_force_ring_key(w)


def _has_hamiltonian_cycle(n: int, ok) -> bool:
    return any(
        all(ok(a, b) for a, b in zip(p, p[1:] + (p[0],)))
        for p in itertools.permutations(range(n))
    )


def test_best_ring_bottleneck_is_the_largest_threshold_with_a_cycle() -> None:
    # An independent view: the best slowest hop is the largest t for which the links ≥ t
    # still contain a Hamiltonian cycle.
    rng = random.Random(7)
    for n in (4, 5, 6):
        for _ in range(5):
            w = random_matrix(n, rng)
            t = max(
                v
                for v in {x for row in w for x in row}
                if _has_hamiltonian_cycle(n, lambda a, b: w[a][b] >= v)
            )
            assert min(ring_links(best_ring(w), w)) == t


def _brute_force_tp(w, size):
    n, best = len(w), None
    for p in itertools.permutations(range(n)):
        groups = [p[i : i + size] for i in range(0, n, size)]
        inside = [w[a][b] for g in groups for a, b in itertools.combinations(g, 2)]
        key = (min(inside), sum(inside))
        best = key if best is None or key > best else best
    return best


@pytest.mark.parametrize("n, size", [(4, 2), (6, 2), (6, 3), (8, 4)])
def test_tp_groups_match_brute_force(n: int, size: int) -> None:
    rng = random.Random(n * 10 + size)
    for _ in range(2 if n == 8 else 4):
        w = random_matrix(n, rng, choices=(1.0, 2.0, 4.0, 7.0))
        groups = tp_groups(w, size)
        assert sorted(g for grp in groups for g in grp) == list(range(n)) and all(
            len(g) == size for g in groups
        )
        inside = [w[a][b] for g in groups for a, b in itertools.combinations(g, 2)]
        assert (min(inside), sum(inside)) == _brute_force_tp(w, size)


def test_link_bandwidths() -> None:
    assert (
        link_bandwidth("NV12", nvlink_gen=3) == 12 * NVLINK_GBPS_PER_LINK[3] == 300.0
    )  # A100: 600 GB/s both ways
    assert (
        link_bandwidth("NV18", nvlink_gen=4) * 2 == 900.0
    )  # H100 datasheet: 900 GB/s total
    for code in ("PIX", "PXB", "PHB", "NODE", "SYS", "SOC"):
        assert (
            link_bandwidth(code, pcie_gen=5) == PCIE_X16_GBPS[5] == 2 * PCIE_X16_GBPS[4]
        )
    assert abs(PCIE_X16_GBPS[3] - 16 * 8e9 * 128 / 130 / 8 / 1e9) < 0.01
    for bad, kwargs in (
        ("X", {}),
        ("NV0", {}),
        ("FOO", {}),
        ("PIX", {"pcie_gen": 6}),
        ("NV2", {"nvlink_gen": 9}),
    ):
        with pytest.raises(ValueError):
            link_bandwidth(bad, **kwargs)


def test_predicted_busbw_is_the_slowest_hop_by_nccl_tests_definition() -> None:
    w = random_matrix(5, random.Random(3))
    ring = best_ring(w)
    slowest = min(ring_links(ring, w))
    assert predicted_busbw(w, ring) == pytest.approx(slowest)
    # by hand: 2(n-1) steps of S/n bytes over the slowest hop
    S, n = 1 << 20, 5
    assert ring_allreduce_seconds(S, n, 10.0) == pytest.approx(
        2 * (n - 1) * (S / n) / 10e9
    )
    assert busbw(S, ring_allreduce_seconds(S, n, 10.0), n) == pytest.approx(10e9)


def test_bad_matrices() -> None:
    with pytest.raises(ValueError, match="square"):
        best_ring([[0.0, 1.0]])
    with pytest.raises(ValueError, match="too many"):
        best_ring([[1.0] * 11 for _ in range(11)])
    with pytest.raises(ValueError, match="divide"):
        tp_groups([[1.0] * 6 for _ in range(6)], 4)


def test_main_self_checks() -> None:
    out = main()
    assert out["rings_checked"] > 0 and out["tables"]["bandwidths"]
