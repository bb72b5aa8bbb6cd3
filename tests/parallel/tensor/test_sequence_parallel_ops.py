"""Sequence parallelism's collectives on 3 ranks, against plain tensor algebra on one
process: gather and scatter are conjugate, and GatheredLinears equals F.linear on the
whole sequence (outputs and gradients, fp64) while saving only the shard."""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist
import torch.nn as nn

from snippets.core.runtime import launch
from snippets.parallel.tensor.sequence_parallel_ops import (
    gather_sequence,
    gathered_linears,
    scatter_sequence,
    split_sequence,
)
from snippets.parallel.tensor.tensor_parallel import (
    ColumnParallelLinear,
    CommLog,
    own_block,
)

F64 = torch.float64


def checks() -> dict:
    rank, t = dist.get_rank(), dist.get_world_size()
    gen = torch.Generator().manual_seed(0)
    full = torch.randn(2, 3 * t, 4, dtype=F64, generator=gen)  # (B, N, d)
    up = torch.randn(2, 3 * t, 4, dtype=F64, generator=gen)  # a gradient from above
    log, out = CommLog(), {}
    x = own_block(full, None, 1).clone().requires_grad_()
    gathered = gather_sequence(x, None, log, "g")
    (gathered * up).sum().backward()  # Σ over ranks of the same up: t·up's rows
    out["gather"] = (gathered - full).abs().max().item()
    out["gather_grad"] = (x.grad - t * own_block(up, None, 1)).abs().max().item()
    partial = (full * (rank + 1)).requires_grad_()  # Σ_r (r+1) = t(t+1)/2
    mine = scatter_sequence(partial, None, log, "s")
    mine.backward(own_block(up, None, 1))
    want = t * (t + 1) / 2 * own_block(full, None, 1)
    out["scatter"] = (mine - want).abs().max().item()
    out["scatter_grad"] = (partial.grad - up).abs().max().item()
    rep = full.clone().requires_grad_()
    split_sequence(rep, None, log, "p").backward(own_block(up, None, 1))
    out["split_grad"] = (rep.grad - up).abs().max().item()
    out["calls"] = [c[:3] for c in log.calls]
    torch.manual_seed(1)
    linears = [nn.Linear(4, 6).to(F64), nn.Linear(4, 9, bias=False).to(F64)]
    dense_x = full.clone().requires_grad_()
    sum(((lin(dense_x) * (i + 1)).sum() for i, lin in enumerate(linears))).backward()
    want_grads = [own_block(p.grad, None, 0) for ln in linears for p in ln.parameters()]
    dense_linears = linears  # each rank: its block of output rows, as in TP
    linears = [ColumnParallelLinear.from_dense(ln, copy_input=False) for ln in linears]
    saved = []
    x = own_block(full, None, 1).clone().requires_grad_()
    hooks = (lambda s: saved.append(s) or s), (lambda s: s)
    with torch.autograd.graph.saved_tensors_hooks(*hooks):
        ys = gathered_linears(x, linears, None, CommLog(), "l")
    sum(((y * (i + 1)).sum() for i, y in enumerate(ys))).backward()  # Σ_r = dense
    got = [p.grad for lin in linears for p in lin.parameters()]
    out["linears"] = max((a - b).abs().max().item() for a, b in zip(got, want_grads))
    out["linears_out"] = max(
        (y - own_block(ln(full))).abs().max().item() for y, ln in zip(ys, dense_linears)
    )
    out["linears_dx"] = (x.grad - own_block(dense_x.grad, None, 1)).abs().max().item()
    out["saved_shapes"] = sorted(tuple(s.shape) for s in saved)
    return out


@pytest.fixture(scope="module")
def result() -> dict:
    return launch(checks, 3, "gloo", timeout_s=60)[0]


def test_gather_and_scatter_are_conjugate(result) -> None:
    for key in ("gather", "gather_grad", "scatter", "scatter_grad", "split_grad"):
        assert result[key] < 1e-12, key
    assert result["calls"] == [
        ("all_gather", "forward", "g"),
        ("reduce_scatter", "backward", "g"),
        ("reduce_scatter", "forward", "s"),
        ("all_gather", "backward", "s"),
        ("all_gather", "backward", "p"),
    ]


def test_gathered_linears_equal_linear_on_the_whole_sequence(result) -> None:
    assert result["linears_out"] < 1e-12 and result["linears"] < 1e-12
    assert result["linears_dx"] < 1e-12


def test_gathered_linears_save_the_shard_not_the_gathered_input(result) -> None:
    assert result["saved_shapes"] == sorted(
        [(2, 3, 4), (2, 4), (3, 4)]
    )  # x shard; 6/3, 9/3 rows
