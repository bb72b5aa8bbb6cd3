"""ranks: one in-process rank, and two spawned ranks that all-reduce by hand's sum."""

from __future__ import annotations

import multiprocessing as mp
import time
from pathlib import Path

import pytest
import torch
import torch.distributed as dist

from snippets.core import ranks


def rank_sum() -> tuple[int, int, float]:
    """Each rank all-reduces rank + 1: the sum over p ranks is p(p + 1)/2."""
    t = torch.tensor([dist.get_rank() + 1.0])
    dist.all_reduce(t)
    return dist.get_rank(), dist.get_world_size(), t.item()


def boom() -> None:
    raise ValueError("rank says no")


def test_run_rank_returns_and_leaves_the_group(tmp_path: Path) -> None:
    out = ranks.run_rank(rank_sum, (), "gloo", 30, 0, 1, str(tmp_path))
    assert out == (0, 1, 1.0)
    assert not dist.is_initialized()


def test_run_rank_destroys_the_group_even_on_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="rank says no"):
        ranks.run_rank(boom, (), "gloo", 30, 0, 1, str(tmp_path))
    assert not dist.is_initialized()


def test_spawn_two_ranks_in_rank_order() -> None:
    values = ranks.spawn(rank_sum, (), 2, "gloo", 30)
    assert values == [(0, 2, 3.0), (1, 2, 3.0)]  # 1 + 2, by hand


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_a_failure_while_the_ranks_meet_is_told_from_one_in_fn() -> None:
    with pytest.raises(ranks.RankError) as met:  # NCCL without a GPU: join_group fails
        ranks.spawn(rank_sum, (), 2, "nccl", 10)
    assert met.value.at_rendezvous
    with pytest.raises(ranks.RankError) as ran:
        ranks.spawn(boom, (), 2, "gloo", 10)
    assert not ran.value.at_rendezvous and "rank says no" in str(ran.value)


def rank_tensor() -> torch.Tensor:
    """A tensor that only this rank's memory holds: it must reach the launcher whole."""
    return torch.full((1024,), float(dist.get_rank() + 1))


class LateReader:
    """The launcher's queue, read only once every rank has exited: the busy launcher of
    a loaded machine, made certain. A rank that has to stay alive to hand its result
    over loses it here; a rank that sent its result by value does not."""

    def __init__(self, ctx, wait_s: float = 20.0) -> None:
        self.ctx, self.wait_s = ctx, wait_s

    def __getattr__(self, name: str):
        return getattr(self.ctx, name)

    def Queue(self):  # noqa: N802 (multiprocessing's name)
        results = self.ctx.Queue()
        get, deadline = results.get, None

        def late_get(*args, **kwargs):
            nonlocal deadline
            deadline = deadline or time.monotonic() + self.wait_s
            ranks_alive = [p for p in mp.active_children() if p.name.startswith("rank")]
            while ranks_alive and time.monotonic() < deadline:
                time.sleep(0.02)
                ranks_alive = [p for p in ranks_alive if p.is_alive()]
            return get(*args, **kwargs)

        results.get = late_get
        return results


def test_a_launcher_that_reads_late_loses_no_result(monkeypatch) -> None:
    context = ranks._context
    monkeypatch.setattr(ranks, "_context", lambda: LateReader(context()))
    values = ranks.spawn(rank_tensor, (), 3, "gloo", 30)
    for r, t in enumerate(values):
        torch.testing.assert_close(t, torch.full((1024,), float(r + 1)))
