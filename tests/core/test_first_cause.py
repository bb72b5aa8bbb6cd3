"""The launcher names the cause of a failure, not a peer's closed connection: against
a queue filled the way ranks fill it, and against a real two-rank failure."""

from __future__ import annotations

import queue
import time

import pytest

from snippets.core import runtime
from snippets.core.errors import RankError
from snippets.core.first_cause import first_cause, is_echo

ECHO = ("Connection closed by peer [127.0.0.1]:5000", "tb", None)
CAUSE = ("RuntimeError: Timed out waiting 1000ms for send operation", "tb", None)


def filled(*reports) -> queue.Queue:
    q: queue.Queue = queue.Queue()
    for report in reports:
        q.put(report)
    return q


def test_an_echo_first_gives_way_to_the_cause_that_follows() -> None:
    q = filled((2, "ok", None), (0, "error", CAUSE))
    assert first_cause(q, 1, ECHO) == (0, CAUSE)


def test_a_cause_first_is_kept_without_waiting() -> None:
    q = filled((1, "error", ECHO))
    start = time.monotonic()
    assert first_cause(q, 0, CAUSE, wait_s=5.0) == (0, CAUSE)
    assert time.monotonic() - start < 1.0 and q.qsize() == 1


def test_only_echoes_keep_the_first_after_the_wait() -> None:
    q = filled((0, "error", ECHO))
    start = time.monotonic()
    assert first_cause(q, 1, ECHO, wait_s=0.3) == (1, ECHO)
    assert 0.25 < time.monotonic() - start < 2.0
    assert is_echo("Broken pipe") and not is_echo(CAUSE[0])


def _raise_on_one_echo_on_zero() -> None:
    """Rank 1 fails with a real cause; rank 0 reports an echo at once, as a peer whose
    connection closed would, and ahead of it."""
    import torch.distributed as dist

    if dist.get_rank() == 0:
        raise ConnectionError(ECHO[0])
    time.sleep(0.2)
    raise ValueError("the real cause")


def test_a_launch_names_the_rank_with_the_cause() -> None:
    with pytest.raises(RankError) as info:
        runtime.launch(_raise_on_one_echo_on_zero, 2, backend="gloo", timeout_s=10)
    assert info.value.rank == 1 and "the real cause" in info.value.cause
