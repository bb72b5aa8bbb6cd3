"""Tensor parallelism (Megatron-LM, Shoeybi et al. 2019, section 3): a Linear's weight
cut over the t ranks of a group, so each rank holds and multiplies 1/t of it.

* ``f`` and ``g`` are the paper's two conjugate operators (its Figure 3). ``f`` is the
  identity forward and an all-reduce backward: every rank's slice of the first weight
  contributed a part of the input's gradient. ``g`` is an all-reduce forward, summing
  the partial products of the second weight, and the identity backward.
* ``ColumnParallelLinear.from_dense(linear, group)`` keeps this rank's block of output
  features (the paper splits A = [A₁, …, A_t] by columns; torch stores Aᵀ, so it is
  rows of ``weight``) and applies ``f`` to its input. ``gather_output=True``
  all-gathers the t output blocks into the dense output.
* ``RowParallelLinear.from_dense(linear, group)`` keeps the matching block of input
  features, multiplies, then ``g``; the bias is added once, after the sum.
  ``input_is_parallel=False`` takes the full input and keeps its own block of it.

Column then row (MLP: fc then proj; attention: q, k, v then proj) needs no collective
between the two. Every collective is SUM (gloo's ``ReduceOp.AVG`` has been wrong) and
is recorded by an optional :class:`CommLog` at the call, with the elements a ring
sends per rank: 2(t−1)/t of the buffer for an all-reduce, (t−1)/t for an all-gather or
a reduce-scatter (counted at the API: gloo builds its reduce-scatter on an all-reduce).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

from snippets.core.runtime import UsageError

RING_SHARE = {"all_reduce": 2, "all_gather": 1, "reduce_scatter": 1}  # × (t−1)/t


# --8<-- [start:log]
@dataclass
class CommLog:
    """Every collective a TP module issues: (op, phase, tag, buffer elements, t)."""

    calls: list[tuple[str, str, str, int, int]] = field(default_factory=list)

    def record(self, op: str, phase: str, tag: str, buffer: torch.Tensor, group):
        self.calls.append((op, phase, tag, buffer.numel(), dist.get_world_size(group)))

    def sent(self, **where: str) -> Fraction:
        """Elements one rank sends in a ring, over the calls matching ``where``
        (e.g. ``phase="backward"``, ``op="all_reduce"``)."""
        keys = ("op", "phase", "tag")
        total = Fraction(0)
        for call in self.calls:
            if all(call[keys.index(k)] == v for k, v in where.items()):
                op, _, _, n, t = call
                total += Fraction(RING_SHARE[op] * (t - 1), t) * n
        return total

    def count(self, **where: str) -> int:
        keys = ("op", "phase", "tag")
        return sum(
            all(c[keys.index(k)] == v for k, v in where.items()) for c in self.calls
        )


def _all_reduce(x, group, log, phase, tag) -> torch.Tensor:
    x = x.contiguous().clone()  # the caller's tensor is never summed in place
    dist.all_reduce(x, op=dist.ReduceOp.SUM, group=group)
    if log is not None:
        log.record("all_reduce", phase, tag, x, group)
    return x


# --8<-- [end:log]


# --8<-- [start:operators]
class CopyToTensorParallel(torch.autograd.Function):
    """Megatron's f: identity forward, all-reduce backward (Shoeybi et al., §3)."""

    @staticmethod
    def forward(ctx, x, group, log, tag):  # x: (…, d), the same on every rank
        ctx.group, ctx.log, ctx.tag = group, log, tag
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):  # each rank's partial ∂L/∂x, summed
        return (
            _all_reduce(grad, ctx.group, ctx.log, "backward", ctx.tag),
            None,
            None,
            None,
        )


class ReduceFromTensorParallel(torch.autograd.Function):
    """Megatron's g: all-reduce forward, identity backward (Shoeybi et al., §3)."""

    @staticmethod
    def forward(ctx, y, group, log, tag):  # y: (…, d), a partial sum on every rank
        return _all_reduce(y, group, log, "forward", tag)

    @staticmethod
    def backward(ctx, grad):
        return grad, None, None, None


def f(x, group=None, log: CommLog | None = None, tag: str = "") -> torch.Tensor:
    return CopyToTensorParallel.apply(x, group, log, tag)


def g(y, group=None, log: CommLog | None = None, tag: str = "") -> torch.Tensor:
    return ReduceFromTensorParallel.apply(y, group, log, tag)


# --8<-- [end:operators]


class GatherLastDim(torch.autograd.Function):
    """All-gather the t blocks of the last dimension; backward keeps this rank's."""

    @staticmethod
    def forward(ctx, y, group, log, tag):  # y: (…, n/t) → (…, n)
        ctx.group = group
        parts = [torch.empty_like(y) for _ in range(dist.get_world_size(group))]
        dist.all_gather(parts, y.contiguous(), group=group)
        if log is not None:
            log.record("all_gather", "forward", tag, torch.cat(parts, -1), group)
        return torch.cat(parts, dim=-1)

    @staticmethod
    def backward(ctx, grad):
        return own_block(grad, ctx.group), None, None, None


def own_block(x: torch.Tensor, group=None, dim: int = -1) -> torch.Tensor:
    """This rank's 1/t block of ``x`` along ``dim``."""
    return x.chunk(dist.get_world_size(group), dim)[dist.get_rank(group)]


def tp_block_size(n: int, group, what: str) -> int:
    """n / t, or one clear UsageError when t does not divide n."""
    t = dist.get_world_size(group)
    if n % t:
        raise UsageError(
            f"{what}={n} is not divisible by the tensor-parallel size {t}; "
            f"choose a size that divides {n}"
        )
    return n // t


# --8<-- [start:layers]
class ColumnParallelLinear(nn.Module):
    """y_r = x A_rᵀ + b_r with A_r this rank's (n/t, k) block of output rows."""

    def __init__(self, weight, bias, group, gather_output, copy_input, log, tag):
        super().__init__()
        self.weight = nn.Parameter(weight)  # (n/t, k)
        self.bias = None if bias is None else nn.Parameter(bias)  # (n/t,)
        self.group, self.gather_output, self.copy_input = (
            group,
            gather_output,
            copy_input,
        )
        self.log, self.tag = log, tag
        self.in_features, self.out_features = weight.shape[1], weight.shape[0]

    @classmethod
    def from_dense(
        cls,
        linear: nn.Linear,
        group=None,
        gather_output=False,
        *,
        copy_input=True,
        log=None,
        tag="",
    ):
        """``copy_input=False`` when the caller applied f once for several layers
        that share one input (attention's q, k and v)."""
        n = tp_block_size(linear.out_features, group, "out_features")
        rows = slice(dist.get_rank(group) * n, (dist.get_rank(group) + 1) * n)
        bias = None if linear.bias is None else linear.bias.detach()[rows].clone()
        weight = linear.weight.detach()[rows].clone()
        return cls(weight, bias, group, gather_output, copy_input, log, tag)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (…, k) → (…, n/t) or (…, n)
        if self.copy_input:
            x = f(x, self.group, self.log, self.tag)
        y = F.linear(x, self.weight, self.bias)
        if self.gather_output:
            y = GatherLastDim.apply(y, self.group, self.log, self.tag)
        return y


class RowParallelLinear(nn.Module):
    """y = g(x_r B_rᵀ) + b with B_r this rank's (n, k/t) block of input columns."""

    def __init__(self, weight, bias, group, input_is_parallel, log, tag):
        super().__init__()
        self.weight = nn.Parameter(weight)  # (n, k/t)
        self.bias = None if bias is None else nn.Parameter(bias)  # (n,), replicated
        self.group, self.input_is_parallel = group, input_is_parallel
        self.log, self.tag = log, tag
        self.in_features, self.out_features = weight.shape[1], weight.shape[0]

    @classmethod
    def from_dense(
        cls, linear: nn.Linear, group=None, input_is_parallel=True, *, log=None, tag=""
    ):
        k = tp_block_size(linear.in_features, group, "in_features")
        cols = slice(dist.get_rank(group) * k, (dist.get_rank(group) + 1) * k)
        bias = None if linear.bias is None else linear.bias.detach().clone()
        weight = linear.weight.detach()[:, cols].clone()
        return cls(weight, bias, group, input_is_parallel, log, tag)

    def reduce(self, partial: torch.Tensor) -> torch.Tensor:
        """Σ over ranks: g. Sequence parallelism swaps in a reduce-scatter."""
        return g(partial, self.group, self.log, self.tag)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (…, k/t) or (…, k) → (…, n)
        if not self.input_is_parallel:  # every rank has all of x: keep its block
            x = own_block(f(x, self.group, self.log, self.tag), self.group)
        y = self.reduce(F.linear(x, self.weight))  # partial (…, n), then summed
        return y if self.bias is None else y + self.bias


def column_parallel(x: torch.Tensor, linear: nn.Linear, group=None) -> torch.Tensor:
    """This rank's block of ``linear(x)``'s output features, (…, n) → (…, n/t)."""
    return ColumnParallelLinear.from_dense(linear, group)(x)


def row_parallel(x: torch.Tensor, linear: nn.Linear, group=None) -> torch.Tensor:
    """``linear``'s whole output from this rank's block of input features, x (…, k/t)
    → (…, n), summed over the group."""
    return RowParallelLinear.from_dense(linear, group)(x)


# --8<-- [end:layers]
