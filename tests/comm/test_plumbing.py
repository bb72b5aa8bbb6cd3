"""The shared plumbing of the hand-made collectives: chunk bounds, the one reduction (against
torch's own elementwise ops), the op/dtype check, and the cross-rank agreement round."""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist
from torch.distributed import ReduceOp

from snippets.comm import plumbing as _p2p
from snippets.core.runtime import launch


@pytest.mark.parametrize("n", [0, 1, 2, 7, 100, 1001])
@pytest.mark.parametrize("parts", [1, 2, 3, 5, 8])
def test_bounds_cover_everything_nearly_evenly(n: int, parts: int) -> None:
    b = _p2p.bounds(n, parts)
    sizes = [b[i + 1] - b[i] for i in range(parts)]
    assert b[0] == 0 and b[-1] == n and sum(sizes) == n
    assert max(sizes) - min(sizes) <= 1 and sizes == sorted(sizes, reverse=True)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int64])
def test_combine_matches_torch(dtype: torch.dtype) -> None:
    g = torch.Generator().manual_seed(0)
    a, b = (torch.randint(-5, 6, (37,), generator=g).to(dtype) for _ in range(2))
    expected = {
        ReduceOp.SUM: a + b,
        ReduceOp.PRODUCT: a * b,
        ReduceOp.MIN: torch.min(a, b),
        ReduceOp.MAX: torch.max(a, b),
    }
    for op, want in expected.items():
        acc = a.clone()
        _p2p.combine_(acc, b, op)
        assert torch.equal(acc, want), op
    if dtype.is_floating_point:
        acc = a.clone()
        _p2p.combine_(acc, b, ReduceOp.AVG)
        _p2p.finish_(acc, ReduceOp.AVG, 2)
        assert torch.allclose(acc, (a + b) / 2)


def test_op_problem() -> None:
    assert _p2p.op_problem(torch.ones(1), ReduceOp.SUM) == ""
    assert "unsupported reduce op" in _p2p.op_problem(torch.ones(1), ReduceOp.BAND)
    assert "unsupported dtype" in _p2p.op_problem(
        torch.ones(1, dtype=torch.bool), ReduceOp.SUM
    )
    assert "AVG" in _p2p.op_problem(torch.ones(1, dtype=torch.int64), ReduceOp.AVG)


def agree_rank() -> dict:
    me = dist.get_rank()
    seen = _p2p.agree([me, 10 * me], "", None)
    try:
        _p2p.agree([me], "my tensor is odd" if me == 2 else "", None)
        raised = ""
    except ValueError as exc:
        raised = str(exc)
    return {"seen": seen, "raised": raised}


def test_agree_shares_fields_and_problems_with_every_rank() -> None:
    per_rank = launch(agree_rank, 3, backend="gloo", timeout_s=30)
    for r in per_rank:
        assert r["seen"] == [[0, 0], [1, 10], [2, 20]]
        assert r["raised"] == "rank 2: my tensor is odd"
