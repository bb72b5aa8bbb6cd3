"""Plumbing shared by the hand-made collectives and all-reduces: the one reduce-op
table, the cross-rank input check, flat views, and the one check of an all-reduce
against ``dist.all_reduce`` that every all-reduce's ``main`` runs.

Data moves only through ``snippets.comm.messages`` (``dist.isend``/``dist.irecv``).
"""

from __future__ import annotations

import argparse
import functools
from dataclasses import dataclass
from typing import Callable

import torch
import torch.distributed as dist
from torch.distributed import ReduceOp

from snippets.comm.messages import wait_all
from snippets.core.claims import LawBroken
from snippets.core.cli import positive_int
from snippets.core.runtime import device

DTYPES = (
    torch.float16,
    torch.bfloat16,
    torch.float32,
    torch.float64,
    torch.int32,
    torch.int64,
)


# --8<-- [start:reduce_op]
@dataclass(frozen=True)
class Reduction:
    """One ``ReduceOp``: how it combines two tensors in place (acc ⊕= other)."""

    op: ReduceOp
    combine: Callable[[torch.Tensor, torch.Tensor], object]
    floats_only: bool = False


# AVG adds, and ``end`` divides once by p, as gloo and NCCL do.
REDUCE_OPS = {
    "SUM": Reduction(ReduceOp.SUM, torch.Tensor.add_),
    "PRODUCT": Reduction(ReduceOp.PRODUCT, torch.Tensor.mul_),
    "MIN": Reduction(ReduceOp.MIN, lambda acc, x: torch.minimum(acc, x, out=acc)),
    "MAX": Reduction(ReduceOp.MAX, lambda acc, x: torch.maximum(acc, x, out=acc)),
    "AVG": Reduction(ReduceOp.AVG, torch.Tensor.add_, floats_only=True),
}


def op_name(op: object) -> str | None:
    return next((name for name, r in REDUCE_OPS.items() if op == r.op), None)


def op_problem(t: torch.Tensor, op: object) -> str:
    """Why (op, dtype) can't be reduced, or '' if it can."""
    name = op_name(op)
    if name is None:
        return f"unsupported reduce op {op}: use {', '.join(REDUCE_OPS)}"
    if t.dtype not in DTYPES:
        return f"unsupported dtype {t.dtype}: use a float or int32/int64 tensor"
    if REDUCE_OPS[name].floats_only and not t.dtype.is_floating_point:
        return f"ReduceOp.{name} needs a floating-point tensor, got {t.dtype}"
    return ""


def combine_(acc: torch.Tensor, other: torch.Tensor, op: ReduceOp) -> None:
    """acc ← acc ⊕ other, elementwise and in place: the one reduction of them all."""
    name = op_name(op)
    if name is None:
        raise ValueError(op_problem(acc, op))
    REDUCE_OPS[name].combine(acc, other)


def finish_(t: torch.Tensor, op: ReduceOp, p: int) -> None:
    if op == ReduceOp.AVG:
        t.div_(p)


# --8<-- [end:reduce_op]


# --8<-- [start:agree]
def group_ranks(group: dist.ProcessGroup | None) -> tuple[list[int], int]:
    """(global ranks of the group in group order, my index among them)."""
    ranks = dist.get_process_group_ranks(group or dist.group.WORLD)
    me = dist.get_rank(group)
    if me < 0:
        raise ValueError(f"rank {dist.get_rank()} is not in this group ({ranks})")
    return ranks, me


def agree(
    fields: list[int], problem: str, group: dist.ProcessGroup | None
) -> list[list[int]]:
    """Every rank learns every rank's ``fields`` (the same number of ints on each) and
    raises the same ValueError if any rank reported a ``problem``: one round of tiny
    messages."""
    ranks, me = group_ranks(group)
    text = list(problem.encode()[:160].ljust(160))
    mine = torch.tensor([len(fields), *fields, *text], device=device())  # int64
    theirs = [mine if j == me else torch.empty_like(mine) for j in range(len(ranks))]
    others = [(j, r) for j, r in enumerate(ranks) if j != me]
    works = [dist.isend(mine, r, group=group) for _, r in others]
    works += [dist.irecv(theirs[j], r, group=group) for j, r in others]
    wait_all(works)
    rows = [t.tolist() for t in theirs]
    for j, row in enumerate(rows):
        reported = bytes(row[1 + row[0] :]).decode(errors="replace").strip()
        if reported:
            raise ValueError(f"rank {ranks[j]}: {reported}")
    return [row[1 : 1 + row[0]] for row in rows]


def agree_on_size(
    t: torch.Tensor, group: dist.ProcessGroup | None, what: str, problem: str = ""
) -> None:
    """Raise on every rank if any rank found a ``problem`` or numel/dtype differ."""
    code = DTYPES.index(t.dtype) if t.dtype in DTYPES else -1
    seen = agree([t.numel(), code], problem, group)
    if len({tuple(row) for row in seen}) > 1:
        raise ValueError(
            f"{what}: tensors differ across ranks (numel, dtype code per rank: "
            f"{seen}); every rank must pass the same size and dtype"
        )


# --8<-- [end:agree]


def peer_problem(peer: int, ranks: list[int], name: str) -> str:
    return "" if peer in ranks else f"{name}={peer} is not a rank of this group {ranks}"


def async_problem(async_op: bool) -> str:
    return "async_op=True is not supported by the hand-made collectives" * async_op


def list_problem(tensors: list | None, like: torch.Tensor, p: int, name: str) -> str:
    """Why ``tensors`` is not p tensors shaped like ``like``, or ''."""
    if tensors is None or len(tensors) != p:
        got = None if tensors is None else len(tensors)
        return f"{name} must hold {p} tensors (one per rank), got {got}"
    if any(t.numel() != like.numel() or t.dtype != like.dtype for t in tensors):
        return f"each tensor in {name} needs numel {like.numel()}, dtype {like.dtype}"
    return ""


def begin(
    tensor: torch.Tensor,
    op: ReduceOp,
    group: dist.ProcessGroup | None,
    what: str,
    check: bool = True,
) -> tuple[torch.Tensor, list[int], int]:
    """Check the input (on every rank, see ``agree``); return (flat view, global ranks,
    my index). A non-contiguous tensor is reduced in a copy that ``end`` writes back."""
    ranks, me = group_ranks(group)
    problem = op_problem(tensor, op)
    if check and len(ranks) > 1:
        agree_on_size(tensor, group, what, problem)
    elif problem:
        raise ValueError(problem)
    flat = tensor.view(-1) if tensor.is_contiguous() else tensor.contiguous().view(-1)
    return flat, ranks, me


def end(tensor: torch.Tensor, flat: torch.Tensor, op: ReduceOp, p: int) -> None:
    finish_(flat, op, p)
    if flat.data_ptr() != tensor.data_ptr() or not tensor.is_contiguous():
        tensor.copy_(flat.view_as(tensor))


# --8<-- [start:check]
TOLERANCE = {  # rtol = atol for floats; integers must match exactly
    torch.float16: 1e-2,
    torch.bfloat16: 2e-2,
    torch.float32: 1e-5,
    torch.float64: 1e-12,
}


def check_against_builtin(
    fn: Callable[..., None],
    x: torch.Tensor,
    op: ReduceOp = ReduceOp.SUM,
    group: dist.ProcessGroup | None = None,
    **options: object,
) -> float:
    """All-reduce one copy of ``x`` with ``fn`` and one with ``dist.all_reduce``;
    return max |ours − torch|, or raise AssertionError naming the algorithm if they
    differ (exactly for integers, by ``TOLERANCE`` for floats)."""
    ours, theirs = x.clone(), x.clone()
    fn(ours, op, group, **options)
    dist.all_reduce(theirs, op, group=group)
    err = (ours - theirs).abs().max().item() if x.numel() else 0
    tol = TOLERANCE.get(x.dtype, 0.0)
    if not torch.allclose(ours, theirs, rtol=tol, atol=tol):
        raise LawBroken(
            f"{algorithm_name(fn)}, {op_name(op)}, {x.dtype}, numel {x.numel()}: "
            f"max |ours − torch| = {err:.3g}, tolerance {tol:g}"
        )
    return float(err)


def check_every_op(
    fn: Callable[..., None],
    x: torch.Tensor,
    group: dist.ProcessGroup | None = None,
    **options: object,
) -> dict[str, float]:
    """``check_against_builtin`` for each op of the table: {op name: max error}."""
    return {
        name: check_against_builtin(fn, x, r.op, group, **options)
        for name, r in REDUCE_OPS.items()
    }


# --8<-- [end:check]


def algorithm_name(fn: Callable) -> str:
    """``ring_allreduce``, or ``naive_allreduce(variant='everyone')`` for a partial."""
    if isinstance(fn, functools.partial):
        args = ", ".join(f"{k}={v!r}" for k, v in fn.keywords.items())
        return f"{algorithm_name(fn.func)}({args})"
    return getattr(fn, "__name__", repr(fn))


def rank_input(numel: int, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """A standard-normal vector (n,), different on every rank, on this rank's device."""
    g = torch.Generator().manual_seed(dist.get_rank())
    return torch.randn(numel, dtype=dtype, generator=g).to(device())


def add_numel_argument(parser: argparse.ArgumentParser, default: int) -> None:
    """The ``--numel`` option every all-reduce snippet takes."""
    parser.add_argument(
        "--numel",
        type=positive_int,
        default=default,
        help=f"elements to all-reduce (default {default:,})",
    )
