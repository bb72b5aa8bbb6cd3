"""The overview's data parallelism: the whole model on every rank, the batch in shards,
every gradient all-reduced once the backward pass is done.

It is the idea in its plainest form, for the overview note. The real thing, with
buckets that overlap the backward pass, is ``ddp``.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F


# --8<-- [start:loss]
def token_loss(logits: torch.Tensor, targets: torch.Tensor, n: int) -> torch.Tensor:
    """Cross-entropy summed over these tokens and divided by n, the token count of the
    WHOLE batch: summed over shards, even uneven or empty ones, it is the full-batch
    mean that ``GPT.forward`` returns."""
    return F.cross_entropy(logits.flatten(0, 1), targets.flatten(), reduction="sum") / n


# --8<-- [end:loss]


# --8<-- [start:data]
def batch_split_step(
    model: nn.Module,
    idx: torch.Tensor,
    targets: torch.Tensor,
    group: dist.ProcessGroup | None = None,
) -> torch.Tensor:
    """Whole model here, 1/p of the batch; afterwards .grad holds the full-batch
    gradient. idx, targets: (B, N) ids, the same on every rank. Returns the loss."""
    rank, p = dist.get_rank(group), dist.get_world_size(group)
    idx_r = idx.tensor_split(p)[rank]  # (B_r, N), B_r = ⌈B/p⌉ or ⌊B/p⌋
    targets_r = targets.tensor_split(p)[rank]
    model.zero_grad()
    logits, _ = model(idx_r)  # (B_r, N, V)
    loss = token_loss(logits, targets_r, targets.numel())
    loss.backward()
    for param in model.parameters():
        dist.all_reduce(param.grad, group=group)  # Σ_r ∇loss_r = ∇(full-batch loss)
    loss = loss.detach().clone()
    dist.all_reduce(loss, group=group)
    return loss


# --8<-- [end:data]
