"""Recursive halving/doubling: rounds and bytes from the trace against Thakur et al.'s
analysis, with and without the fold for non-powers of two; and its main() check."""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist

from snippets.comm.algorithms import halving_doubling as H
from snippets.core.runtime import launch

N = 1001


def check_rank() -> dict:
    p = dist.get_world_size()
    x = torch.ones(N, dtype=torch.float64)
    trace: list = []
    H.halving_doubling_allreduce(x, trace=trace)
    assert torch.equal(x, torch.full((N,), float(p), dtype=torch.float64))
    return {"trace": trace, "main": H.main(2003)}


@pytest.fixture(scope="module", params=[4, 5, 6])
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


def rabenseifner_bytes(v: int, q: int, n: int, itemsize: int) -> int:
    """What virtual rank v sends in the reduce-scatter and all-gather, from the
    schedule: in the round with blocks of 2^k chunks it sends one half of its block
    (halving) and, coming back, the other half (doubling), so the whole aligned block
    of 2^k chunks around v, for k = 1 … log2 q. With equal chunks that is
    (2 + 4 + … + q) · n/q = 2(q−1)/q · n elements."""
    chunk = [n // q + (j < n % q) for j in range(q)]  # the first n % q get one more
    total, size = 0, 2
    while size <= q:
        start = v // size * size
        total += sum(chunk[start : start + size])
        size *= 2
    return total * itemsize


def test_every_rank_sends_what_the_schedule_says(run: tuple[int, list[dict]]) -> None:
    p, per_rank = run
    q = 1 << (p.bit_length() - 1)
    r = p - q  # ranks 0 … 2r−1 pair up: the even ones fold into the odd ones
    ring = 2 * (q - 1) / q * N * 8  # the ring's volume, among the q that take part
    for me in range(p):
        trace = per_rank[me]["trace"]
        sent = {
            phase: sum(s.nbytes for s in trace if s.phase == phase)
            for phase in ("fold", "reduce-scatter", "all-gather", "unfold")
        }
        folded_away = me < 2 * r and me % 2 == 0
        v = me // 2 if me < 2 * r else me - r
        inner = 0 if folded_away else rabenseifner_bytes(v, q, N, 8)
        assert sent["reduce-scatter"] + sent["all-gather"] == inner, (me, sent)
        assert sent["fold"] == (N * 8 if folded_away else 0), (me, sent)
        assert sent["unfold"] == (N * 8 if me < 2 * r and me % 2 else 0), (me, sent)
        if not folded_away:  # and the exact count is the ring's, give or take a chunk
            assert abs(inner - ring) <= (q.bit_length() - 1) * 8, (me, inner, ring)


def test_main(run: tuple[int, list[dict]]) -> None:
    p, per_rank = run
    q = 1 << (p.bit_length() - 1)
    assert per_rank[0]["main"]["rounds"] == 2 * (q.bit_length() - 1) + (
        2 if q < p else 0
    )
