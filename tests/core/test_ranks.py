"""ranks: one in-process rank, and two spawned ranks that all-reduce by hand's sum; a
report that outlives its rank, and ranks that fail while they meet named as such."""

from __future__ import annotations

import multiprocessing as mp
import os
import time
from pathlib import Path
from typing import Callable

import pytest
import rank_workers
import torch
import torch.distributed as dist
from conftest import process_children

from snippets.core import ranks, runtime


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


@pytest.mark.parametrize(
    "asked, cores, want",
    [("1", 8, 1), ("", 8, 8), ("3", 2, 2), ("0", 4, 1), ("2,1", 8, 2)],
)
def test_a_gloo_rank_takes_its_share_of_the_cores_and_never_more_threads_than_asked(
    tmp_path: Path, monkeypatch, asked: str, cores: int, want: int
) -> None:
    monkeypatch.setattr(ranks.os, "cpu_count", lambda: cores)
    monkeypatch.setenv("OMP_NUM_THREADS", asked)
    before = torch.get_num_threads()
    try:
        ranks.run_rank(rank_sum, (), "gloo", 30, 0, 1, str(tmp_path))
        assert torch.get_num_threads() == want
    finally:
        torch.set_num_threads(before)


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
    monkeypatch.setattr(ranks, "_context", lambda preload: LateReader(context(preload)))
    values = ranks.spawn(rank_tensor, (), 3, "gloo", 30)
    for r, t in enumerate(values):
        torch.testing.assert_close(t, torch.full((1024,), float(r + 1)))


class StartsAs:
    """The launcher's context, each rank's process started as ``target`` (a rank with
    a fault of its own, in rank_workers) instead of ``ranks._child``."""

    def __init__(self, ctx, target) -> None:
        self.ctx, self.target, self.started = ctx, target, 0

    def __getattr__(self, name: str):
        return getattr(self.ctx, name)

    def Process(self, *, target, **kwargs):  # noqa: N802 (multiprocessing's name)
        self.started += 1
        return self.ctx.Process(target=self.target, **kwargs)


def starting_as(monkeypatch, target) -> StartsAs:
    context = StartsAs(ranks._context(), target)
    monkeypatch.setattr(ranks, "_context", lambda preload: context)
    return context


@pytest.mark.skipif(
    "forkserver" not in mp.get_all_start_methods(), reason="no fork server here"
)
def test_the_context_hands_its_preload_to_the_fork_server(monkeypatch) -> None:
    asked: list = []
    server = mp.get_context("forkserver")
    monkeypatch.setattr(server, "set_forkserver_preload", asked.append)
    assert ranks._context(("torch",)) is server
    assert ranks._context() is server
    assert asked == [["torch"], list(ranks.DEFAULT_PRELOAD)]


@pytest.mark.timeout(120)
def test_ranks_that_fail_to_meet_in_an_echos_words_are_launched_once_more(
    monkeypatch,
) -> None:
    """Three ranks whose loopback connections reset while they meet: each reports
    that, in words an echo uses, and exits at once. They reported, so none died
    without a word, and launch starts them once more (here they fail again)."""
    context = starting_as(monkeypatch, rank_workers.meets_with_a_reset)
    with pytest.raises(ranks.RankError) as err:
        runtime.launch(rank_sum, 3, backend="gloo", timeout_s=30)
    assert "without reporting" not in err.value.cause, err.value
    assert err.value.at_rendezvous and "Connection reset by peer" in err.value.cause
    assert context.started == 6  # 3 ranks, twice
    assert process_children(os.getpid()) == []


@pytest.mark.timeout(120)
def test_a_report_outlives_a_rank_killed_before_it_rang(monkeypatch) -> None:
    """Rank 1 raises, writes its report, and is killed before it can tell the
    launcher; its peer, cut off, echoes and is killed the same way. The launcher still
    names rank 1 and its own words, not a death without a word."""
    starting_as(monkeypatch, rank_workers.killed_as_it_rings)
    with pytest.raises(ranks.RankError) as err:
        ranks.spawn(rank_workers.raises_on_rank_one, (), 2, "gloo", 30)
    assert err.value.rank == 1, err.value
    assert err.value.cause == "ValueError: rank one was told to fail"
    assert process_children(os.getpid()) == []


@pytest.mark.timeout(120)
def test_a_rank_that_exits_without_a_report_is_named_not_waited_for() -> None:
    """Rank 1 leaves with status 0 and says nothing; rank 0 would return after 30 s.
    Only a report says a rank finished, so rank 1 is named as soon as it is gone."""
    start = time.monotonic()
    with pytest.raises(ranks.RankError) as err:
        ranks.spawn(rank_workers.leaves_quietly_on_rank_one, (), 2, "gloo", 60)
    assert err.value.rank == 1
    assert err.value.cause == "process exited with status 0 without reporting"
    assert time.monotonic() - start < 20
    assert process_children(os.getpid()) == []


def test_gloo_ranks_meet_in_a_barrier_before_any_may_leave(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A rank with nothing to do returns at once; had it left while a peer was still
    connecting, that peer's init would fail on a closed socket. join_group holds every
    gloo rank until all have met."""
    calls: list[str] = []

    def note(what: str) -> Callable:
        return lambda *_, **__: calls.append(what)

    monkeypatch.setattr(dist, "init_process_group", note("init"))
    monkeypatch.setattr(dist, "barrier", note("barrier"))
    monkeypatch.setattr(torch, "set_num_threads", note("threads"))
    ranks.join_group("gloo", 30, 0, 3, str(tmp_path))
    assert calls == ["init", "barrier", "threads"]
