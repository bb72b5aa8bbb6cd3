"""Broadcast, reduce, scatter and gather on 2 ranks against torch.distributed's own,
with the root at rank 1 (not 0), 2-D float tensors and an odd length."""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch.distributed import ReduceOp

from snippets.comm.collective import rooted_collectives as R
from snippets.core.runtime import launch


def _x(seed: int) -> torch.Tensor:
    return torch.randn(3, 5, generator=torch.Generator().manual_seed(seed))


def rooted_rank() -> list[str]:
    me, p, root = dist.get_rank(), dist.get_world_size(), 1
    bad: list[str] = []
    x = _x(me)
    for op in (ReduceOp.SUM, ReduceOp.PRODUCT, ReduceOp.MAX):
        a, b = x.clone(), x.clone()
        R.reduce(a, root, op), dist.reduce(b, root, op)
        if not (torch.allclose(a, b) if me == root else torch.equal(a, x)):
            bad.append(f"reduce {op} rank {me}")
    for src in (0, root, p - 1):
        a, b = x.clone(), x.clone()
        R.broadcast(a, src), dist.broadcast(b, src)
        if not torch.equal(a, b):
            bad.append(f"broadcast src={src} rank {me}")
    pieces = [_x(100 + j) for j in range(p)] if me == root else None
    a, b = torch.empty_like(x), torch.empty_like(x)
    R.scatter(a, pieces, src=root), dist.scatter(b, pieces, src=root)
    if not torch.equal(a, b):
        bad.append(f"scatter rank {me}")
    la = [torch.empty_like(x) for _ in range(p)] if me == root else None
    lb = [torch.empty_like(x) for _ in range(p)] if me == root else None
    R.gather(x, la, dst=root), dist.gather(x, lb, dst=root)
    if me == root and not all(map(torch.equal, la, lb)):
        bad.append("gather at the root")
    return bad


def test_rooted_collectives_match_torch_on_2_ranks() -> None:
    per_rank = launch(rooted_rank, 2, backend="gloo", timeout_s=30)
    assert [f for r in per_rank for f in r] == []
