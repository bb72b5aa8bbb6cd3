"""Megatron's f and g, and the column- and row-parallel Linears: outputs and every
gradient equal the dense nn.Linear's (fp64) and torch's DTensor ColwiseParallel /
RowwiseParallel; the collectives counted at the calls."""

from __future__ import annotations

from fractions import Fraction

import pytest
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor.parallel import (
    ColwiseParallel,
    RowwiseParallel,
    parallelize_module,
)

from snippets.core.runtime import UsageError, launch
from snippets.parallel.tensor.tensor_parallel import (
    ColumnParallelLinear,
    CommLog,
    RowParallelLinear,
    f,
    g,
    own_block,
)

F64 = torch.float64


def dense_run(layers, x):
    """Output and gradients of a dense stack on x (the oracle)."""
    x = x.clone().requires_grad_()
    y = x
    for layer in layers:
        y = layer(y)
    (y * torch.arange(y.numel(), dtype=F64).view_as(y)).sum().backward()
    return y.detach(), x.grad


def operators() -> dict:
    """f and g on integer-valued tensors: sums are exact (Megatron's ones · rank)."""
    rank, t = dist.get_rank(), dist.get_world_size()
    x = torch.full((3,), float(rank + 1), dtype=F64, requires_grad=True)
    log = CommLog()
    fx = f(x, None, log, "f")
    fx.backward(torch.full((3,), float(rank)))
    y = torch.full((3,), float(rank + 1), dtype=F64, requires_grad=True)
    gy = g(y, None, log, "g")
    gy.backward(torch.full((3,), 5.0, dtype=F64))
    return {
        "f_forward": fx.tolist() == x.tolist(),
        "f_backward": x.grad.tolist() == [t * (t - 1) / 2] * 3,  # Σ rank
        "g_forward": gy.tolist() == [t * (t + 1) / 2] * 3,  # Σ (rank + 1)
        "g_backward": y.grad.tolist() == [5.0] * 3,
        "calls": [c[:2] for c in log.calls],
        "x_unchanged": x.tolist() == [rank + 1.0] * 3,
    }


def layers() -> dict:
    torch.manual_seed(0)  # every rank builds the same dense layers
    fc, proj = nn.Linear(6, 8).to(F64), nn.Linear(8, 5).to(F64)
    x = torch.randn(2, 3, 6, dtype=F64)
    want_y, want_dx = dense_run([fc, F.gelu, proj], x)
    out = {}
    for gather in (False, True):  # column → (gather) → row, input parallel or not
        log = CommLog()
        col = ColumnParallelLinear.from_dense(fc, None, gather_output=gather, log=log)
        row = RowParallelLinear.from_dense(
            proj, None, input_is_parallel=not gather, log=log
        )
        y, dx = dense_run([col, F.gelu, row], x)
        grads = [
            (col.weight.grad, own_block(fc.weight.grad, None, 0)),
            (col.bias.grad, own_block(fc.bias.grad, None, 0)),
            (row.weight.grad, own_block(proj.weight.grad, None, 1)),
            (row.bias.grad, proj.bias.grad),
        ]
        out[f"gather={gather}"] = {
            "y": (y - want_y).abs().max().item(),
            "dx": (dx - want_dx).abs().max().item(),
            "grads": max((a - b).abs().max().item() for a, b in grads),
            "calls": sorted(c[:2] for c in log.calls),
        }
        fc.zero_grad(), proj.zero_grad()
        dense_run([fc, F.gelu, proj], x)  # the dense grads again, for the next pass
    try:
        ColumnParallelLinear.from_dense(nn.Linear(4, 7), None)
    except UsageError as error:
        out["usage"] = str(error)
    out["dtensor"] = versus_dtensor(fc, proj, x)
    return out


def versus_dtensor(fc, proj, x) -> dict:
    """torch's own tensor parallelism on the same dense layers: a second oracle."""
    ours = [ColumnParallelLinear.from_dense(fc), RowParallelLinear.from_dense(proj)]
    theirs = nn.Sequential(nn.Linear(6, 8), nn.GELU(), nn.Linear(8, 5)).to(F64)
    theirs[0].load_state_dict(fc.state_dict())
    theirs[2].load_state_dict(proj.state_dict())
    mesh = init_device_mesh("cpu", (dist.get_world_size(),))
    parallelize_module(theirs, mesh, {"0": ColwiseParallel(), "2": RowwiseParallel()})
    y, dx = dense_run([ours[0], F.gelu, ours[1]], x)
    y_t, dx_t = dense_run([theirs], x)
    pairs = [(y, y_t), (dx, dx_t)] + [
        (mine.weight.grad, their.weight.grad.to_local())  # DTensor: this rank's
        for mine, their in zip(ours, (theirs[0], theirs[2]))
    ]
    return {"max_abs_diff": max((a - b).abs().max().item() for a, b in pairs)}


def checks() -> dict:
    return {"operators": operators(), "layers": layers()}


@pytest.fixture(scope="module")
def result() -> dict:
    return launch(checks, 2, "gloo", timeout_s=60)[0]


def test_f_and_g_are_conjugate(result) -> None:
    ops = result["operators"]
    assert ops["f_forward"] and ops["f_backward"] and ops["x_unchanged"]
    assert ops["g_forward"] and ops["g_backward"]
    assert ops["calls"] == [("all_reduce", "backward"), ("all_reduce", "forward")]


def test_column_then_row_equals_the_dense_layers(result) -> None:
    for mode, r in result["layers"].items():
        if not mode.startswith("gather="):
            continue
        assert r["y"] < 1e-12 and r["dx"] < 1e-12 and r["grads"] < 1e-12, mode
    plain = result["layers"]["gather=False"]["calls"]
    assert plain == [("all_reduce", "backward"), ("all_reduce", "forward")]
    gathered = result["layers"]["gather=True"]["calls"]  # + gather and f of row
    assert ("all_gather", "forward") in gathered and len(gathered) == 4


def test_equals_torch_dtensor_tensor_parallel(result) -> None:
    assert result["layers"]["dtensor"]["max_abs_diff"] < 1e-12


def test_indivisible_width_is_one_clear_usage_error(result) -> None:
    message = result["layers"]["usage"]
    assert "out_features=7" in message and "size 2" in message
    assert "\n" not in message


def test_ring_elements_per_call() -> None:
    log = CommLog()  # hand-worked: t = 4, buffers of 12 and 8 elements
    log.calls += [("all_reduce", "forward", "a", 12, 4), ("all_gather", "x", "a", 8, 4)]
    assert log.sent(op="all_reduce") == Fraction(2 * 3, 4) * 12 == 18
    assert log.sent(tag="a") == 18 + 6 and log.count(tag="a") == 2
