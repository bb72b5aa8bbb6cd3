"""The zig-zag layout: a round trip, equal causal work on every rank, and which block
of a visiting K/V each rank's queries see."""

from __future__ import annotations

import pytest
import torch

from snippets.attention import zigzag_layout as zz


@pytest.mark.parametrize("p, n", [(1, 6), (2, 8), (3, 6 * 7), (5, 10)])
def test_round_trip_and_balance(p: int, n: int) -> None:
    x = torch.arange(n)[None, None, :, None].expand(2, 1, n, 3)
    shards = [zz.zigzag_shard(x, r, p) for r in range(p)]
    assert torch.equal(zz.zigzag_unshard(shards), x)
    positions = [s[0, 0, :, 0].tolist() for s in shards]
    assert sorted(i for pos in positions for i in pos) == list(range(n))
    work = {zz.causal_pairs(pos) for pos in positions}
    assert len(work) == 1, "zig-zag must give every rank the same causal work"


@pytest.mark.parametrize("p", [2, 3, 4])
def test_visible_block_is_exactly_what_the_causal_mask_leaves(p: int) -> None:
    """Brute force: for every step and rank, the (query, key) pairs the mask allows
    between the local and the visiting shard are exactly the block returned."""
    n = 2 * 3  # rows per rank: two chunks of 3
    positions = torch.arange(2 * p * 3)[None, None, :]
    pos = [zz.zigzag_shard(positions, r, p)[0, 0] for r in range(p)]
    for rank in range(p):
        for step in range(p):
            src = (rank - step) % p
            allowed = pos[rank][:, None] >= pos[src][None, :]  # (n, n)
            rows, cols, masked = zz.visible_block(step, rank, p, True, n)
            block = torch.zeros(n, n, dtype=torch.bool)
            block[rows, cols] = True
            if masked:  # only the diagonal block keeps a mask inside the block
                assert step == 0 and torch.equal(allowed, torch.ones(n, n).tril() > 0)
            else:
                assert torch.equal(allowed, block), (rank, step)


def test_uneven_length_is_refused() -> None:
    with pytest.raises(ValueError, match="divisible by 2 × world size = 6"):
        zz.zigzag_shard(torch.randn(1, 1, 10, 32), 0, 3)
