"""snippets.core.measure against what is known: allocations of a known size,
nccl-tests' published bus-bandwidth factors, and sleeps of a known length, on one
rank and on two."""

from __future__ import annotations

import os
import time

import pytest
import torch

from snippets.core.measure import (
    algbw,
    busbw,
    peak_memory_bytes,
    time_it,
    time_samples,
)
from snippets.core.runtime import launch

MiB = 1 << 20
SLACK = 64 * 1024  # small tensors the ops make on the side (scalars, shapes)


# --- peak_memory_bytes: validated against allocations whose size is known ---


def _two_live_at_once() -> None:
    a = torch.empty(3 * MiB, dtype=torch.uint8)
    b = torch.empty(5 * MiB, dtype=torch.uint8)  # a is still live: the peak is a + b
    del a, b


def _one_after_another() -> None:
    for n in (3, 5, 2):
        t = torch.ones(n * MiB, dtype=torch.uint8)  # the previous t is freed first
        t.add_(1)
        del t


def test_peak_of_tensors_live_together_is_their_sum():
    peak = peak_memory_bytes(_two_live_at_once)
    assert 8 * MiB <= peak <= 8 * MiB + SLACK


def test_peak_of_tensors_freed_in_turn_is_the_largest():
    peak = peak_memory_bytes(_one_after_another)
    assert 5 * MiB <= peak <= 5 * MiB + SLACK


def test_memory_live_before_the_call_does_not_count():
    resident = torch.zeros(16 * MiB, dtype=torch.uint8)
    peak = peak_memory_bytes(lambda: resident.add_(1))  # in place: nothing new
    assert peak <= SLACK
    assert resident[0] == 1


def test_matmul_output_is_counted():
    x = torch.randn(300, 500)
    expected = 300 * 300 * 4  # x @ xᵀ: a (300, 300) fp32 result
    peak = peak_memory_bytes(lambda: x @ x.T)
    assert expected <= peak <= expected + SLACK


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_peak_counts_a_known_allocation():
    dev = torch.device("cuda")
    peak = peak_memory_bytes(
        lambda: torch.empty(8 * MiB, dtype=torch.uint8, device=dev), dev
    )
    assert 8 * MiB <= peak <= 8 * MiB + 2 * MiB  # the allocator rounds blocks up


# --- bandwidth: nccl-tests' doc/PERFORMANCE.md factors ---


@pytest.mark.parametrize(
    "collective, n, factor",
    [
        ("all_reduce", 4, 1.5),  # 2(n-1)/n
        ("all_reduce", 2, 1.0),
        ("all_gather", 8, 7 / 8),  # (n-1)/n
        ("reduce_scatter", 5, 4 / 5),
        ("broadcast", 3, 1.0),
    ],
)
def test_busbw_is_algbw_times_the_nccl_tests_factor(collective, n, factor):
    size, seconds = 1 << 30, 0.25
    assert algbw(size, seconds) == 4 * (1 << 30)
    assert busbw(size, seconds, n, collective) == pytest.approx(4 * (1 << 30) * factor)


def test_time_it_takes_the_median_after_the_warmup():
    pauses = iter([0.2, 0.2, 0.01, 0.05, 0.01])  # two warm-ups, then three timed
    median = time_it(lambda: time.sleep(next(pauses)), warmup=2, iters=3)
    assert 0.01 <= median < 0.04


def test_time_samples_keeps_every_timed_call_in_order():
    pauses = iter([0.2, 0.01, 0.12, 0.05])  # one warm-up, then three timed
    got = time_samples(lambda: time.sleep(next(pauses)), warmup=1, iters=3)
    assert len(got) == 3 and got[0] < got[2] < got[1]  # 0.01, 0.12, 0.05 as slept
    assert all(0.009 <= t < 0.5 for t in got)


def _each_rank_sleeps_its_own() -> list[float]:
    import torch.distributed as dist

    mine = {0: [0.0, 0.02, 0.15, 0.02], 1: [0.0, 0.3, 0.02, 0.02]}[dist.get_rank()]
    pauses = iter(mine)  # one warm-up, then three timed
    return time_samples(lambda: time.sleep(next(pauses)), warmup=1, iters=3)


def test_time_samples_keeps_the_slowest_ranks_time_of_each_call():
    a, b = launch(_each_rank_sleeps_its_own, 2, "gloo", timeout_s=60)
    assert a == b  # every rank reports the same times
    # call by call, the longer of the two sleeps (a sleep is never shorter)
    assert a[0] >= 0.3 and a[1] >= 0.15 and a[2] >= 0.02


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="reads /proc")
def test_busy_core_burns_a_core_while_open_and_leaves_nothing_behind() -> None:
    from snippets.core.measure import busy_core

    def cpu_s(pid: int) -> float:
        fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    # On a loaded machine the program gets a slice of a core, not a core: it must
    # keep computing while the block runs, however long that takes to show.
    with busy_core() as pid:
        deadline = time.monotonic() + 60
        while cpu_s(pid) < 0.3 and time.monotonic() < deadline:
            time.sleep(0.1)
        burnt = cpu_s(pid)
    assert burnt >= 0.3  # it computed, not slept
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # killed and reaped on the way out
