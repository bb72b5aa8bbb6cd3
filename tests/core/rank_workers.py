"""What the ranks of tests/core run: programs whose fault sits on a marked line that
the tests find in this file's source, and ranks that start with a fault of their own
(each replaces ``ranks._child`` as a process's target and takes its arguments)."""

from __future__ import annotations

import multiprocessing.queues
import os
import signal
import time

import torch
import torch.distributed as dist

from snippets.core import ranks


def one_all_reduce_more() -> int:
    """Rank 0 calls all_reduce once more than rank 1, which returns meanwhile."""
    x = torch.ones(1)
    dist.all_reduce(x)
    if dist.get_rank() == 0:
        dist.all_reduce(x)  # THE EXTRA ALL_REDUCE
    return dist.get_rank()


def raises_on_rank_one() -> None:
    """Rank 1 raises while rank 0 waits in a barrier: both first meet in one, so that
    rank 0 is past joining the group (a rank can leave it a while before its peer)."""
    dist.barrier()
    if dist.get_rank() == 1:
        time.sleep(0.5)  # rank 0 goes on to its barrier meanwhile
        raise ValueError("rank one was told to fail")  # THE VALUEERROR
    dist.barrier()  # RANK ZERO WAITS HERE


def leaves_quietly_on_rank_one() -> int:
    """Rank 1 exits with status 0 and no report; rank 0 takes a while, then returns."""
    if dist.get_rank() == 1:
        os._exit(0)
    time.sleep(30)
    return 0


def meets_with_a_reset(*child_args) -> None:
    """A rank whose join fails as gloo's loopback connections did under load: reset,
    in the words a peer's echo uses."""

    def reset(*_: object) -> None:
        raise ConnectionResetError("Connection reset by peer")

    ranks.join_group = reset
    ranks._child(*child_args)


def killed_as_it_rings(*child_args) -> None:
    """A rank killed (SIGKILL, as the OOM killer would) the moment it puts anything on
    a multiprocessing queue: after its report is written, if it writes one first."""

    def killed(*_: object, **__: object) -> None:
        os.kill(os.getpid(), signal.SIGKILL)

    multiprocessing.queues.Queue.put = killed
    ranks._child(*child_args)
