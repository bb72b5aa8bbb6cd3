"""ZeRO shards: gather rebuilds a padded parameter, reduce_grad is the mean's chunk,
the counter sees N·⌈n/N⌉ values per call; storage_bytes counts views once."""

from __future__ import annotations

import torch
import torch.distributed as dist
import torch.nn as nn

from snippets.core.runtime import launch
from snippets.parallel.sharded.zero_shards import CommCounter, Piece, storage_bytes


def test_storage_bytes_counts_a_storage_once() -> None:
    base = torch.zeros(10, dtype=torch.float64)
    other = torch.zeros(3, dtype=torch.float32)
    empty = torch.zeros(4)
    empty.untyped_storage().resize_(0)
    assert storage_bytes([base, base[2:5], base.view(2, 5), other, empty, 7]) == 92


def pieces() -> dict:
    rank = dist.get_rank()
    want = torch.arange(5.0)  # n = 5 on N = 2: s = 3, chunks [0, 3) and [3, 5)
    param = nn.Parameter(want.clone())
    comm = CommCounter()
    piece = Piece(param, comm, own_storage=True)
    chunk = piece.chunk.detach().clone()
    piece.free()
    freed = param.untyped_storage().nbytes()
    piece.gather()
    param.grad = torch.full((5,), 2.0 + 4 * rank)  # mean over ranks: 4
    piece.reduce_grad(into_param_grad=False)
    return {
        "chunk": chunk.tolist(),
        "freed": freed,
        "gathered": param.detach().tolist() == want.tolist(),
        "grad": piece.chunk.grad.tolist(),
        "elements": dict(comm.elements),
    }


def test_two_ranks_gather_and_reduce_a_padded_parameter() -> None:
    r0, r1 = launch(pieces, 2, backend="gloo", timeout_s=30)
    assert r0["chunk"] == [0, 1, 2] and r1["chunk"] == [3, 4]
    assert r0["grad"] == [4, 4, 4] and r1["grad"] == [4, 4]
    for r in (r0, r1):
        assert r["freed"] == 0 and r["gathered"]
        assert r["elements"] == {"all_gather": 6, "reduce_scatter": 6}
