"""all_to_all_single from send/recv against gloo's own at world sizes 1-5: uneven and
empty splits, equal splits by default, rows of any shape; a size mismatch between two
ranks raises the same one-line error on every rank, and bad input on one rank too."""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist

from snippets.comm.collective import all_to_all as A
from snippets.core.runtime import launch


def compare_rank() -> list[str]:
    p, me = dist.get_world_size(), dist.get_rank()
    bad = []
    for n, width, dtype in ((9, 2, torch.float64), (4, 0, torch.int64), (0, 3, None)):
        got = A.check_against_torch(n, width, dtype or torch.float32)
        if not got["equal"]:
            bad.append(f"p={p} rank {me}: n={n} width={width}")
    x = torch.arange(4 * p, dtype=torch.float64).reshape(2 * p, 2) + 100 * me
    ours, theirs = torch.empty_like(x), torch.empty_like(x)
    A.all_to_all_single(ours, x)  # no sizes: equal blocks of 2 rows
    dist.all_to_all_single(theirs, x)
    if not torch.equal(ours, theirs):
        bad.append(f"p={p} rank {me}: equal splits")
    return bad


@pytest.fixture(scope="module")
def five() -> list[list[str]]:
    return launch(compare_rank, 5, "gloo", 60)


def test_matches_gloo_on_five_ranks(five) -> None:
    assert five == [[]] * 5


@pytest.mark.parametrize("p", [1, 2, 3])
def test_matches_gloo_on_fewer_ranks(p: int) -> None:
    assert launch(compare_rank, p, "gloo", 60) == [[]] * p


def mismatch_rank() -> list[str]:
    me = dist.get_rank()
    x = torch.zeros(3)
    out = torch.zeros(3 if me == 0 else 2)  # rank 1 expects one row too few
    try:
        A.all_to_all_single(out, x, [1, 2] if me == 0 else [1, 1], [1, 2])
    except ValueError as exc:
        return [str(exc)]
    return []


def bad_input_rank() -> list[str]:
    me = dist.get_rank()
    x = torch.zeros(4)
    try:  # rank 1 alone gives sizes that do not sum to its rows
        A.all_to_all_single(torch.zeros(4), x, None, [3, 3] if me == 1 else None)
    except ValueError as exc:
        return [str(exc)]
    return []


def test_a_size_mismatch_raises_on_every_rank() -> None:
    said = launch(mismatch_rank, 2, "gloo", 30)
    assert said[0] == said[1] and len(said[0]) == 1
    assert "rank 0 sends 2 rows to rank 1, which expects 1" in said[0][0]
    said = launch(bad_input_rank, 2, "gloo", 30)
    assert said[0] == said[1] and "rank 1: input_split_sizes" in said[0][0]


def test_split_sizes_by_hand() -> None:
    assert A.split_sizes(None, 6, 3, "x") == [2, 2, 2]
    assert A.split_sizes([0, 6, 0], 6, 3, "x") == [0, 6, 0]
    for sizes, rows in (([1, 2], 3), ([4, -1, 3], 6), ([1, 1, 1], 4), (None, 7)):
        with pytest.raises(ValueError):
            A.split_sizes(sizes, rows, 3, "x")


def test_random_splits_cover_the_rows_and_include_empty_blocks() -> None:
    g = torch.Generator().manual_seed(0)
    draws = [A.random_splits(5, 4, g) for _ in range(50)]
    assert all(sum(d) == 5 and len(d) == 4 and min(d) >= 0 for d in draws)
    assert any(0 in d for d in draws)
