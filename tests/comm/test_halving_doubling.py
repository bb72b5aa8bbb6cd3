"""Recursive halving/doubling: rounds and bytes from the trace against Thakur et al.'s
analysis, with and without the fold for non-powers of two; and its main() check."""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist

from snippets.comm import halving_doubling as H
from snippets.core.runtime import launch

N = 1001


def check_rank() -> dict:
    p = dist.get_world_size()
    x = torch.ones(N, dtype=torch.float64)
    trace: list = []
    H.halving_doubling_allreduce(x, trace=trace)
    assert torch.equal(x, torch.full((N,), float(p), dtype=torch.float64))
    return {"trace": trace, "main": H.main(2003)}


@pytest.fixture(scope="module", params=[4, 5])
def run(request: pytest.FixtureRequest) -> tuple[int, list[dict]]:
    return request.param, launch(
        check_rank, request.param, backend="gloo", timeout_s=60
    )


def test_rounds(run: tuple[int, list[dict]]) -> None:
    p, per_rank = run
    q = 1 << (p.bit_length() - 1)
    sends = [s for r in per_rank for s in r["trace"]]
    assert len({s.step for s in sends}) == 2 * (q.bit_length() - 1) + (
        2 if q < p else 0
    )
    for s in (
        sends
    ):  # halving and doubling partners differ in exactly one bit of the virtual rank
        if s.phase in ("reduce-scatter", "all-gather") and q == p:
            assert bin(s.src ^ s.dst).count("1") == 1


def test_bytes_per_rank(run: tuple[int, list[dict]]) -> None:
    p, per_rank = run
    q = 1 << (p.bit_length() - 1)
    inner = (
        2 * (q - 1) / q * N * 8
    )  # the ring's volume, among the q ranks that take part
    for r in range(p):
        sent = sum(
            s.nbytes
            for s in per_rank[r]["trace"]
            if s.phase in ("reduce-scatter", "all-gather")
        )
        folded = sum(
            s.nbytes for s in per_rank[r]["trace"] if s.phase in ("fold", "unfold")
        )
        assert sent == 0 or abs(sent - inner) <= 2 * q * 8, (r, sent, inner)
        assert folded in (0, N * 8)


def test_main(run: tuple[int, list[dict]]) -> None:
    p, per_rank = run
    q = 1 << (p.bit_length() - 1)
    assert per_rank[0]["main"]["rounds"] == 2 * (q.bit_length() - 1) + (
        2 if q < p else 0
    )
