"""The overview's model and pipeline parallelism: contiguous blocks of the GPT per rank,
activations sent rank → rank + 1; then GPipe's forward, the batch in m micro-batches.

Only the forward pass, to show the split and measure the bubble. Schedules with the
backward pass (GPipe, 1F1B, interleaved, zero-bubble) are ``pipeline_schedules``.
"""

from __future__ import annotations

from fractions import Fraction

import torch
import torch.distributed as dist

from snippets.models.tiny_gpt import GPT


def split_sizes(n: int, parts: int, what: str) -> list[int]:
    """torch.tensor_split's sizes: the first n % parts parts get one more."""
    if not 1 <= parts <= n:
        raise ValueError(
            f"cannot split {n} {what} into {parts} non-empty parts; use at most {n}"
        )
    return [n // parts + (i < n % parts) for i in range(parts)]


def part(n: int, parts: int, i: int, what: str) -> range:
    """The i-th of `parts` contiguous pieces of range(n), as split_sizes cuts it."""
    sizes = split_sizes(n, parts, what)
    return range(sum(sizes[:i]), sum(sizes[: i + 1]))


# --8<-- [start:stage]
def run_stage(model: GPT, rank: int, p: int, a: torch.Tensor) -> torch.Tensor:
    """Stage `rank` of p: the embeddings on the first, its blocks[a:b], the head on
    the last. a: token ids (B, N) on the first stage, activations (B, N, d) after."""
    if rank == 0:
        a = model.embed(a)  # (B, N, d)
    for i in part(len(model.blocks), p, rank, "blocks"):
        a = model.blocks[i](a)
    return model.head(a) if rank == p - 1 else a  # logits (B, N, V) or (B, N, d)


def activation(model: GPT, idx: torch.Tensor) -> torch.Tensor:
    """An empty buffer for what crosses a stage boundary: (B, N, d)."""
    w = model.tok_emb.weight
    return torch.empty(*idx.shape, model.config.n_embd, dtype=w.dtype, device=w.device)


# --8<-- [end:stage]


# --8<-- [start:model_parallel]
def layer_split_forward(
    model: GPT, idx: torch.Tensor, group: dist.ProcessGroup | None = None
) -> torch.Tensor | None:
    """Rank 0 reads the ids; each stage runs its part and sends the activation on. The
    last stage returns the logits, the others None. Only one rank works at a time."""
    rank, p = dist.get_rank(group), dist.get_world_size(group)
    a = idx if rank == 0 else activation(model, idx)
    if rank > 0:
        dist.recv(a, group=group, group_src=rank - 1)
    a = run_stage(model, rank, p, a)
    if rank < p - 1:
        dist.send(a, group=group, group_dst=rank + 1)
        return None
    return a


# --8<-- [end:model_parallel]


# --8<-- [start:pipeline]
def gpipe_forward(
    model: GPT, idx: torch.Tensor, m: int, group: dist.ProcessGroup | None = None
) -> tuple[torch.Tensor | None, list[tuple[int, int]]]:
    """GPipe's forward: the batch in m micro-batches, each passed on as soon as it is
    done. A logical clock travels with each activation: a stage runs micro-batch j at
    the first step after both its own previous micro-batch and the previous stage's
    run of j. Returns (the last stage's logits or None, this stage's [(j, step)])."""
    rank, p = dist.get_rank(group), dist.get_world_size(group)
    split_sizes(idx.shape[0], m, "sequences")  # m ≤ B: no empty micro-batches
    clock = torch.empty(1, dtype=torch.int64, device=idx.device)
    free, schedule, outputs = 0, [], []
    for j, idx_j in enumerate(idx.tensor_split(m)):  # (B_j, N); rank 0 reads the ids
        a, ready = idx_j, 0
        if rank > 0:
            a = activation(model, idx_j)  # (B_j, N, d)
            dist.recv(a, group=group, group_src=rank - 1)
            dist.recv(clock, group=group, group_src=rank - 1)
            ready = int(clock.item()) + 1
        step = max(free, ready)
        a = run_stage(model, rank, p, a)
        schedule.append((j, step))
        free = step + 1
        if rank < p - 1:
            dist.send(a, group=group, group_dst=rank + 1)
            clock.fill_(step)
            dist.send(clock, group=group, group_dst=rank + 1)
        else:
            outputs.append(a)
    return (torch.cat(outputs) if rank == p - 1 else None), schedule


def bubble_fraction(schedules: list[list[tuple[int, int]]]) -> Fraction:
    """Idle share of the p × T grid of (stage, step) slots, T = the steps it took."""
    T = 1 + max(step for s in schedules for _, step in s)
    busy = sum(len(s) for s in schedules)
    return Fraction(len(schedules) * T - busy, len(schedules) * T)


def gpipe_bubble(p: int, m: int) -> Fraction:
    """Huang et al. 2019: the bubble is (p − 1)/(m + p − 1) of the time."""
    return Fraction(p - 1, m + p - 1)


# --8<-- [end:pipeline]


def schedule_rows(schedules: list[list[tuple[int, int]]]) -> list[dict]:
    """The recorded schedule as a grid: one row per stage, F<j> where it ran j."""
    T = 1 + max(step for s in schedules for _, step in s)
    rows = []
    for rank, s in enumerate(schedules):
        cells = {step: f"F{j}" for j, step in s}
        rows.append({"stage": f"rank {rank}"})
        rows[-1].update({f"t={t}": cells.get(t, "·") for t in range(T)})
    return rows
