"""The zig-zag layout of a sequence over p ranks, for causal ring attention.

With a causal mask and contiguous slices, rank 0's queries see only its own keys while
the last rank's see everyone's, so every step of the ring waits for the last rank.
Cut the sequence into 2p chunks and give rank r chunks r and 2p-1-r: then, for a
visiting block from rank s ≠ r, exactly half of the work is unmasked on every rank
(Zhu, ring-flash-attention; Brandon et al., "Striped Attention", 2023, for a sibling).
"""

from __future__ import annotations

from collections.abc import Iterable

import torch


# --8<-- [start:zigzag]
def zigzag_shard(
    x: torch.Tensor, rank: int, world_size: int, dim: int = 2
) -> torch.Tensor:
    """Rank r's part of a full sequence: chunks r and 2p-1-r of 2p equal chunks."""
    n = x.shape[dim]
    if n % (2 * world_size):
        raise ValueError(
            f"sequence length {n} must be divisible by 2 × world size = "
            f"{2 * world_size} for the zig-zag layout; pad it"
        )
    chunks = x.chunk(2 * world_size, dim=dim)
    return torch.cat([chunks[rank], chunks[2 * world_size - 1 - rank]], dim=dim)


def zigzag_unshard(shards: list[torch.Tensor], dim: int = 2) -> torch.Tensor:
    """Inverse of zigzag_shard: the p ranks' shards, in rank order, back to the full
    sequence."""
    p = len(shards)
    halves = [h for s in shards for h in s.chunk(2, dim=dim)]  # [r0a, r0b, r1a, ...]
    order = [
        halves[2 * c] if c < p else halves[2 * (2 * p - 1 - c) + 1]
        for c in range(2 * p)
    ]
    return torch.cat(order, dim=dim)


# --8<-- [end:zigzag]


# --8<-- [start:visible]
def visible_block(
    step: int, rank: int, world_size: int, causal: bool, n: int
) -> tuple[slice, slice, bool]:
    """Which local query rows and which visiting key rows interact at this step of the
    ring, and whether that block needs the causal mask. Zig-zag: each half of a rank's
    n rows is one of the 2p chunks."""
    everything, first, second = slice(0, n), slice(0, n // 2), slice(n // 2, n)
    src = (rank - step) % world_size  # whose K/V is visiting
    if not causal:
        return everything, everything, False
    if step == 0:  # our own chunks (r, 2p-1-r): an ordinary causal mask over the pair
        return everything, everything, True
    if src < rank:  # both our chunks come after its first chunk and before its second
        return everything, first, False
    # src > rank: only our later chunk 2p-1-r sees its chunks, and all of them
    return second, everything, False


# --8<-- [end:visible]


def causal_pairs(positions: Iterable[int]) -> int:
    """Unmasked (query, key) pairs under a causal mask: query i sees keys 0..i."""
    return sum(i + 1 for i in positions)
