"""Training loops the ZeRO checks compare: sharded on every rank, and the single
process that sees the whole (concatenated) batch.

Rank r trains on rows [r·b, (r+1)·b) of each global batch of N·b sequences; the mean
of the ranks' mean losses is the global mean loss, so the mean of their gradients is
the single process's gradient and the trained weights must agree.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from snippets.models.tiny_gpt import GPT, GPTConfig
from snippets.parallel import zero


def batches(cfg: GPTConfig, steps: int, rows: int, seed: int = 1) -> list:
    """(idx, targets), each (rows, block_size), one pair per step."""
    g = torch.Generator().manual_seed(seed)
    shape = (2, rows, cfg.block_size)
    return [torch.randint(cfg.vocab_size, shape, generator=g) for _ in range(steps)]


def train_single(cfg, optimizer_class, kwargs, data, dtype) -> dict:
    """One process, the whole batch: the oracle. Returns its state dict."""
    model = GPT(cfg).to(dtype)
    optimizer = optimizer_class(model.parameters(), **kwargs)
    for idx, targets in data:
        optimizer.zero_grad()
        model(idx, targets)[1].backward()
        optimizer.step()
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def train_sharded(cfg, stage, optimizer_class, kwargs, data, dtype, group=None):
    """ZeRO on this rank's rows. Returns (module, optimizer, values communicated per
    step) with the last step's gradients and state still held, for memory_report."""
    rank, N = dist.get_rank(group), dist.get_world_size(group)
    module, optimizer = zero.shard(
        GPT(cfg).to(dtype), optimizer_class, stage, group, **kwargs
    )
    per_step = []
    for idx, targets in data:
        b = idx.shape[0] // N
        optimizer.zero_grad()
        optimizer.comm.reset()
        rows = slice(rank * b, (rank + 1) * b)
        module(idx[rows], targets[rows])[1].backward()
        optimizer.step()
        per_step.append(dict(optimizer.comm.elements))
    return module, optimizer, per_step


def max_difference(state: dict, reference: dict) -> float:
    return max((state[k] - reference[k]).abs().max().item() for k in reference)
