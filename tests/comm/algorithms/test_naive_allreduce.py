"""Naive all-reduces: both variants agree with dist.all_reduce (inside main), and the
bytes each rank sends, from the trace, are what the note says: (p−1)·n at the root,
or everywhere."""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist

from snippets.comm.algorithms import naive_allreduce as Nv
from snippets.core.runtime import launch

N = 101


def check_rank() -> dict:
    p = dist.get_world_size()
    out = {"main": Nv.main(1001)}
    for variant in Nv.VARIANTS:
        x = torch.arange(N, dtype=torch.int64) * (dist.get_rank() + 1)
        trace: list = []
        Nv.naive_allreduce(x, variant=variant, trace=trace)
        assert torch.equal(
            x, torch.arange(N, dtype=torch.int64) * (p * (p + 1) // 2)
        )  # Σ (r+1) = p(p+1)/2
        out[variant] = sum(s.nbytes for s in trace)
    return out


@pytest.mark.parametrize("p", [3, 5])
def test_bytes_sent(p: int) -> None:
    per_rank = launch(check_rank, p, backend="gloo", timeout_s=60)
    n = N * 8
    assert [r["root"] for r in per_rank] == [(p - 1) * n] + [n] * (p - 1)
    assert [r["everyone"] for r in per_rank] == [(p - 1) * n] * p
    assert (
        per_rank[0]["main"]["tables"]["bytes"][0]["root: bytes sent"]
        == (p - 1) * 1000 * 8
    )


def test_unknown_variant() -> None:
    with pytest.raises(ValueError, match="variant"):
        Nv.naive_allreduce(torch.ones(2), variant="star")
