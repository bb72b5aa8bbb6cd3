"""Training loops the ZeRO checks compare: sharded on every rank, and the single
process that sees the whole (concatenated) batch.

Rank r trains on rows [r·b, (r+1)·b) of each global batch of N·b sequences; the mean
of the ranks' mean losses is the global mean loss, so the mean of their gradients is
the single process's gradient and the trained weights must agree. With k micro-steps
a rank splits its rows into k micro-batches and backpropagates each mean loss ÷ k:
the accumulated gradient is its rows' mean gradient, as one big step's is.
"""

from __future__ import annotations

from typing import Callable

import torch
import torch.distributed as dist
import torch.nn as nn

from snippets.models.tiny_gpt import GPT, GPTConfig
from snippets.parallel.sharded import zero


def batches(cfg: GPTConfig, steps: int, rows: int, seed: int = 1) -> list:
    """(idx, targets), each (rows, block_size), one pair per step."""
    g = torch.Generator().manual_seed(seed)
    shape = (2, rows, cfg.block_size)
    return [torch.randint(cfg.vocab_size, shape, generator=g) for _ in range(steps)]


def train_single(cfg, optimizer_class, kwargs, data, dtype, make=GPT) -> dict:
    """One process, the whole batch, one backward a step: the oracle. Returns its state
    dict. ``make(cfg)`` builds the model (the tiny GPT unless a test varies it)."""
    model = make(cfg).to(dtype)
    optimizer = optimizer_class(model.parameters(), **kwargs)
    for idx, targets in data:
        optimizer.zero_grad()
        model(idx, targets)[1].backward()
        optimizer.step()
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def train_sharded(
    cfg,
    stage: int,
    optimizer_class,
    kwargs: dict,
    data: list,
    dtype: torch.dtype,
    group: dist.ProcessGroup | None = None,
    make: Callable[[GPTConfig], nn.Module] = GPT,
    micro_steps: int = 1,
):
    """ZeRO on this rank's rows, in ``micro_steps`` micro-batches a step. Returns
    (module, optimizer, values communicated per step) with the last step's gradients
    and state still held, for memory_report."""
    rank, N = dist.get_rank(group), dist.get_world_size(group)
    module, optimizer = zero.shard(
        make(cfg).to(dtype), optimizer_class, stage, group, **kwargs
    )
    per_step = []
    for idx, targets in data:
        b = idx.shape[0] // N  # this rank's rows
        m = b // micro_steps  # rows per micro-batch
        assert m * micro_steps == b, f"{b} rows do not split into {micro_steps}"
        optimizer.zero_grad()
        optimizer.comm.reset()
        for k in range(micro_steps):
            rows = slice(rank * b + k * m, rank * b + (k + 1) * m)
            loss = module(idx[rows], targets[rows])[1]
            (loss / micro_steps).backward()  # Σ over k of mean ÷ k: the mean
        optimizer.step()
        per_step.append(dict(optimizer.comm.elements))
    return module, optimizer, per_step


def max_difference(state: dict, reference: dict) -> float:
    return max((state[k] - reference[k]).abs().max().item() for k in reference)
