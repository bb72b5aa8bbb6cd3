"""Zero-bubble's split of a backward pass: B computes the gradient a layer sends
upstream, W the gradient of its own weights, later.

For y = x Wᵀ + b, B is ∂L/∂x = ∂L/∂y · W, which the previous stage is waiting for; W
is ∂L/∂W = (∂L/∂y)ᵀ x and ∂L/∂b = Σ ∂L/∂y, which nobody waits for (Qi et al. 2023,
§2). Inside :func:`split_backward`, every ``F.linear`` on a weight of a module runs
one whose backward returns ∂L/∂x at once and files the weight-gradient product under
the current key (chunk, micro-batch) of a :class:`WeightGradients`; ``run(key)`` does
that work and adds it into ``.grad``. A ``TorchFunctionMode`` catches the call, so
``nn.Linear`` and the tensor-parallel Linears, which call ``F.linear`` on their
slice, are split alike. Sequence parallelism's gathered Linears compute theirs in
their own autograd function, which asks :func:`deferring` for the store and files
its weight-gradient work there too.

B runs with ``retain_graph=True``: the graph, and with it the activations, stay
alive until W, so a deferred W keeps its micro-batch in flight. Other parameters
(LayerNorm, embeddings, a bias added after a row-parallel sum) still get their
gradients in B: they are small.
"""

from __future__ import annotations

from collections import defaultdict
from contextlib import contextmanager
from typing import Callable, Hashable, Iterator, Sequence

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode


class WeightGradients:
    """Deferred ∂L/∂W products per key; forward files under ``key``."""

    def __init__(self) -> None:
        self.key: Hashable = None
        self.pending: dict[Hashable, list[Callable[[], None]]] = defaultdict(list)

    def file(self, key: Hashable, params: Sequence, gradients: Callable) -> None:
        """File work under `key`: ``gradients()`` gives ∂L/∂p for each of `params`
        (None: no gradient); ``run(key)`` adds them into ``.grad``."""

        def work() -> None:
            with torch.no_grad():
                for param, grad in zip(params, gradients()):
                    if grad is not None:
                        accumulate(param, grad)

        self.pending[key].append(work)

    def run(self, key: Hashable) -> int:
        """Do the weight-gradient work filed under `key`; return how many filings."""
        work = self.pending.pop(key, [])
        for product in work:
            product()
        return len(work)


def accumulate(param: torch.Tensor, grad: torch.Tensor) -> None:
    """What autograd's AccumulateGrad does: set .grad, or add into it."""
    if param.grad is None:
        param.grad = grad.clone()
    else:
        param.grad.add_(grad)


# --8<-- [start:split]
class SplitLinear(torch.autograd.Function):
    """y = x Wᵀ + b, whose backward is B only; W is filed for later."""

    @staticmethod
    def forward(ctx, x, weight, bias, store: WeightGradients):  # x: (..., in)
        ctx.save_for_backward(x)
        ctx.store, ctx.key, ctx.weight, ctx.bias = store, store.key, weight, bias
        return F.linear(x, weight, bias)  # (..., out)

    @staticmethod
    def backward(ctx, dy):  # dy: (..., out)
        (x,), weight, bias = ctx.saved_tensors, ctx.weight, ctx.bias

        def weight_gradient() -> tuple:  # W: ∂L/∂W = dyᵀ x, (out, in); ∂L/∂b = Σ dy
            rows = dy.flatten(0, -2)  # (tokens, out)
            return rows.T @ x.flatten(0, -2), None if bias is None else rows.sum(0)

        ctx.store.file(ctx.key, (weight, bias), weight_gradient)
        return dy @ weight, None, None, None  # B: ∂L/∂x = dy W, (..., in)


class SplitLinears(TorchFunctionMode):
    """While active, F.linear on one of `weights` (by identity) runs as SplitLinear."""

    active: list[SplitLinears] = []  # entered and not yet left, innermost last

    def __init__(self, weights: set[int], store: WeightGradients):
        super().__init__()
        self.weights, self.store = weights, store

    def __enter__(self):
        SplitLinears.active.append(self)
        return super().__enter__()

    def __exit__(self, *exc):
        SplitLinears.active.remove(self)
        return super().__exit__(*exc)

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is F.linear and torch.is_grad_enabled():  # no graph, nothing to defer
            x, weight, bias = (*args, kwargs.get("bias"))[:3]
            if id(weight) in self.weights:
                return SplitLinear.apply(x, weight, bias, self.store)
        return func(*args, **kwargs)


@contextmanager
def split_backward(module: nn.Module, store: WeightGradients) -> Iterator[None]:
    """Inside this block every F.linear on a weight of `module` runs through
    SplitLinear: nn.Linear's and the tensor-parallel layers' alike."""
    with SplitLinears({id(p) for p in module.parameters()}, store):
        yield


def deferring(weight: torch.Tensor) -> WeightGradients | None:
    """The store an active split files `weight`'s gradient in, else None: for an
    autograd function that computes its weight gradients itself."""
    if torch.is_grad_enabled():
        for mode in reversed(SplitLinears.active):
            if id(weight) in mode.weights:
                return mode.store
    return None


# --8<-- [end:split]
