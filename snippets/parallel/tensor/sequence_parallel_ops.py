"""The collectives of sequence parallelism (Korthikanti et al. 2022, "Reducing
Activation Recomputation in Large Transformer Models", section 4.2.2), as autograd
functions on activations (B, N, d) cut along the sequence N.

* ``gather_sequence`` is the paper's g: all-gather forward, reduce-scatter backward.
* ``scatter_sequence`` is its conjugate ḡ: reduce-scatter forward, all-gather
  backward. It takes the place of tensor parallelism's all-reduce after a row-parallel
  Linear: the partial sums are summed and cut in one collective.
* ``split_sequence``: keep this rank's N/t rows of a replicated tensor; backward
  all-gathers the rows' gradients.
* ``GatheredLinears``: all-gather a shard, then several Linears on the whole sequence
  (attention's q, k, v; the MLP's fc). It saves the shard, not the gathered input,
  and gathers again in backward, as Megatron-LM's
  ``LinearWithGradAccumulationAndAsyncCommunication`` does. That is what makes every
  activation of a layer 1/t: one more all-gather per Linear group in backward.
  Under ``split_backward`` (zero-bubble's B/W split) that gather and the weight
  gradients are filed for W; B only reduce-scatters ∂L/∂x.

Every collective is SUM and recorded at the call by the optional ``CommLog``; the
buffer counted is the whole (B, N, d) tensor, of which a ring sends (t−1)/t per rank.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
import torch.nn.functional as F

from snippets.parallel.pipeline.pipeline_weight_grad import deferring
from snippets.parallel.tensor.tensor_parallel import CommLog, own_block


# --8<-- [start:collectives]
def _gather(x, group, log, phase, tag) -> torch.Tensor:
    """(B, N/t, d) on each rank → (B, N, d), rank order along N."""
    t = dist.get_world_size(group)
    rows = x.transpose(0, 1).contiguous()  # (N/t, B, d): the cut dimension first
    full = rows.new_empty((t * rows.shape[0], *rows.shape[1:]))
    dist.all_gather_single(full, rows, group=group)
    if log is not None:
        log.record("all_gather", phase, tag, full, group)
    return full.transpose(0, 1)


def _reduce_scatter(x, group, log, phase, tag) -> torch.Tensor:
    """Σ over ranks of (B, N, d), then this rank's (B, N/t, d)."""
    t = dist.get_world_size(group)
    rows = x.transpose(0, 1).contiguous()  # (N, B, d)
    mine = rows.new_empty((rows.shape[0] // t, *rows.shape[1:]))
    dist.reduce_scatter_single(mine, rows, op=dist.ReduceOp.SUM, group=group)
    if log is not None:
        log.record("reduce_scatter", phase, tag, rows, group)
    return mine.transpose(0, 1)


class GatherSequence(torch.autograd.Function):
    """Korthikanti's g: all-gather forward, reduce-scatter backward."""

    @staticmethod
    def forward(ctx, x, group, log, tag):
        ctx.args = group, log, tag
        return _gather(x, group, log, "forward", tag)

    @staticmethod
    def backward(ctx, grad):
        return _reduce_scatter(grad, *ctx.args[:2], "backward", ctx.args[2]), *[
            None
        ] * 3


class ScatterSequence(torch.autograd.Function):
    """Korthikanti's ḡ: reduce-scatter forward, all-gather backward."""

    @staticmethod
    def forward(ctx, x, group, log, tag):
        ctx.args = group, log, tag
        return _reduce_scatter(x, group, log, "forward", tag)

    @staticmethod
    def backward(ctx, grad):
        return _gather(grad, *ctx.args[:2], "backward", ctx.args[2]), *[None] * 3


class SplitSequence(torch.autograd.Function):
    """Keep this rank's rows of a replicated (B, N, d); backward gathers the rows."""

    @staticmethod
    def forward(ctx, x, group, log, tag):
        ctx.args = group, log, tag
        return own_block(x, group, dim=1).clone()

    @staticmethod
    def backward(ctx, grad):
        return _gather(grad, *ctx.args[:2], "backward", ctx.args[2]), *[None] * 3


def gather_sequence(x, group=None, log: CommLog | None = None, tag: str = ""):
    return GatherSequence.apply(x, group, log, tag)


def scatter_sequence(x, group=None, log: CommLog | None = None, tag: str = ""):
    return ScatterSequence.apply(x, group, log, tag)


def split_sequence(x, group=None, log: CommLog | None = None, tag: str = ""):
    return SplitSequence.apply(x, group, log, tag)


# --8<-- [end:collectives]


# --8<-- [start:gathered]
class GatheredLinears(torch.autograd.Function):
    """y_i = gather(x) W_iᵀ + b_i for a shard x (B, N/t, k), saving only the shard."""

    @staticmethod
    def forward(ctx, x, group, log, tag, store, *weights_and_biases):
        ctx.args, ctx.params = (group, log, tag), weights_and_biases
        ctx.store, ctx.key = store, None if store is None else store.key
        weights, biases = weights_and_biases[::2], weights_and_biases[1::2]
        ctx.has_bias = [b is not None for b in biases]
        ctx.save_for_backward(x, *weights)  # the shard: 1/t of the input
        full = _gather(x, group, log, "forward", tag)  # (B, N, k)
        return tuple(F.linear(full, w, b) for w, b in zip(weights, biases))

    @staticmethod
    def backward(ctx, *grads):  # each (B, N, n_i/t)
        x, *weights = ctx.saved_tensors
        group, log, tag = ctx.args

        def weight_gradients() -> list:  # ∂L/∂W_i = grad_iᵀ gather(x), ∂L/∂b_i = Σ
            full = _gather(x, group, log, "backward", tag).flatten(0, 1)  # (BN, k)
            out = []
            for grad, has_bias in zip(grads, ctx.has_bias):
                grad = grad.flatten(0, 1)  # (BN, n_i/t)
                out += [grad.T @ full, grad.sum(0) if has_bias else None]
            return out

        if ctx.store is None:
            out = weight_gradients()
        else:  # inside split_backward: W gathers and multiplies, later
            ctx.store.file(ctx.key, ctx.params, weight_gradients)
            out = [None] * len(ctx.params)
        grad_full = sum(grad @ w for grad, w in zip(grads, weights))  # (B, N, k)
        grad_x = _reduce_scatter(grad_full, group, log, "backward", tag)
        return grad_x, None, None, None, None, *out


def gathered_linears(x, linears, group=None, log=None, tag="") -> tuple:
    """The outputs of ``linears`` (their weights and biases) on gather(x)."""
    flat = [p for lin in linears for p in (lin.weight, lin.bias)]
    store = deferring(linears[0].weight)  # None outside split_backward
    return GatheredLinears.apply(x, group, log, tag, store, *flat)


# --8<-- [end:gathered]
