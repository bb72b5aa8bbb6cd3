"""all_gather, reduce_scatter, all_to_all and barrier on 2 ranks against
torch.distributed's own, with float 2-D pieces of an odd length."""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch.distributed import ReduceOp

from snippets.comm.collective import symmetric_collectives as S
from snippets.core.runtime import launch


def _x(seed: int) -> torch.Tensor:
    return torch.randn(2, 5, generator=torch.Generator().manual_seed(seed))


def symmetric_rank() -> list[str]:
    me, p = dist.get_rank(), dist.get_world_size()
    bad: list[str] = []
    x = _x(me)
    la, lb = ([torch.empty_like(x) for _ in range(p)] for _ in range(2))
    S.all_gather(la, x), dist.all_gather(lb, x)
    if not all(map(torch.equal, la, lb)):
        bad.append(f"all_gather rank {me}")
    inputs = [_x(10 * me + j) for j in range(p)]
    for op in (ReduceOp.SUM, ReduceOp.MIN, ReduceOp.AVG):
        a, b = torch.empty_like(x), torch.empty_like(x)
        S.reduce_scatter(a, inputs, op), dist.reduce_scatter(b, inputs, op)
        if not torch.allclose(a, b):
            bad.append(f"reduce_scatter {op} rank {me}")
        if not all(torch.equal(t, _x(10 * me + j)) for j, t in enumerate(inputs)):
            bad.append(f"reduce_scatter {op} changed its inputs on rank {me}")
    la, lb = ([torch.empty_like(x) for _ in range(p)] for _ in range(2))
    S.all_to_all(la, inputs), dist.all_to_all(lb, inputs)
    if not all(map(torch.equal, la, lb)):
        bad.append(f"all_to_all rank {me}")
    S.barrier()
    return bad


def test_symmetric_collectives_match_torch_on_2_ranks() -> None:
    per_rank = launch(symmetric_rank, 2, backend="gloo", timeout_s=30)
    assert [f for r in per_rank for f in r] == []
