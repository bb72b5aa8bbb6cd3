"""The launcher names the cause of a failure, not a peer's closed connection: against
a queue filled the way ranks fill it, and against a real two-rank failure; and where a
rank waited, read from tracebacks laid out as Python writes them, with torch's files."""

from __future__ import annotations

import queue
import time

import pytest
import torch.distributed.c10d_logger
import torch.distributed.distributed_c10d

from snippets.core import ranks, runtime
from snippets.core.errors import RankError
from snippets.core.first_cause import first_cause, is_echo, returned_while, waited_in

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
    assert time.monotonic() - start < 4.0 and q.qsize() == 1  # not the 5 s wait


def test_only_echoes_keep_the_first_after_the_wait() -> None:
    q = filled((0, "error", ECHO))
    start = time.monotonic()
    assert first_cause(q, 1, ECHO, wait_s=0.3) == (1, ECHO)
    assert 0.25 < time.monotonic() - start < 4.0
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


# --- where a rank waited, from its traceback ---

C10D = torch.distributed.distributed_c10d.__file__
LOGGER = torch.distributed.c10d_logger.__file__
RANKS = ranks.__file__


def tb(*frames: tuple[str, int, str], error: str = "RuntimeError: closed") -> str:
    lines = ["Traceback (most recent call last):"]
    for file, line, fn in frames:
        lines += [f'  File "{file}", line {line}, in {fn}', "    code"]
    return "\n".join(lines + [error]) + "\n"


IN_ALL_REDUCE = tb(
    (RANKS, 300, "_child"),
    ("/home/me/train.py", 12, "step"),
    (LOGGER, 83, "wrapper"),
    (C10D, 3252, "all_reduce"),
)


def test_the_line_is_the_readers_and_the_collective_is_past_the_wrappers() -> None:
    assert waited_in(IN_ALL_REDUCE) == ("all_reduce", "/home/me/train.py", 12)
    chained = tb(("/home/me/train.py", 3, "f"), error="KeyError: 1")
    chained += (
        "\nDuring handling of the above exception, another exception occurred:\n\n"
    )
    assert waited_in(chained + IN_ALL_REDUCE) == waited_in(IN_ALL_REDUCE)
    assert returned_while([1], 0, IN_ALL_REDUCE) == (
        "rank 1 returned while rank 0 was still in all_reduce at /home/me/train.py:12"
    )
    assert returned_while([1, 3], 2, IN_ALL_REDUCE).startswith(
        "ranks 1, 3 returned while rank 2 was still in all_reduce"
    )


def test_no_sentence_where_the_rank_failed_in_its_own_code_or_while_meeting() -> None:
    own = tb((RANKS, 300, "_child"), ("/home/me/train.py", 20, "step"))
    meeting = tb((RANKS, 80, "join_group"), (C10D, 1500, "init_process_group"))
    assert waited_in(own) is None and waited_in(meeting) is None
    assert returned_while([1], 0, own) == returned_while([1], 0, meeting) == ""
    assert returned_while([], 0, IN_ALL_REDUCE) == ""  # nobody returned
