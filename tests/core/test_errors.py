"""The two error kinds: what they are, and what a RankError says and carries: its
rank's traceback as its cause, then why and where the others were, in its message."""

from __future__ import annotations

import pytest

from snippets.core.errors import RankError, RemoteTraceback, UsageError


def test_rank_error_names_the_rank_and_cause() -> None:
    err = RankError(3, "timed out after 30 s", "Traceback ...\nValueError: x")
    assert str(err) == "rank 3 failed: timed out after 30 s"
    assert (err.rank, err.cause) == (3, "timed out after 30 s")
    assert err.remote_traceback.endswith("ValueError: x")
    assert err.usage is None


def test_rank_error_keeps_a_refusal_message() -> None:
    err = RankError(0, "UsageError", usage="--n must be even, got 3")
    assert err.usage == "--n must be even, got 3" and err.remote_traceback == ""


def test_the_kinds_are_told_apart_by_class() -> None:
    assert issubclass(RankError, RuntimeError)
    assert not issubclass(UsageError, RuntimeError)
    with pytest.raises(UsageError, match="one line"):
        raise UsageError("one line")
    with pytest.raises(RuntimeError, match="rank 1 failed: died"):
        raise RankError(1, "died")


def test_the_rank_traceback_is_the_cause_as_for_a_process_pool() -> None:
    tb = (
        'Traceback (most recent call last):\n  File "w.py", line 9, in f\nValueError: x'
    )
    err = RankError(1, "ValueError: x", tb)
    assert isinstance(err.__cause__, RemoteTraceback)
    assert err.__cause__.text == tb and tb in str(err.__cause__)
    assert RankError(1, "process exited with status -9").__cause__ is None  # no words


def test_the_message_says_why_then_where_the_others_were() -> None:
    stacks = {2: '  File "b.py", line 4 in g\n', 0: '  File "a.py", line 3 in f\n'}
    err = RankError(
        1, "RuntimeError: timed out", reason="rank 3 returned", stacks=stacks
    )
    assert str(err).splitlines() == [
        "rank 1 failed: RuntimeError: timed out",
        "rank 3 returned",
        "[rank 0] where it was when rank 1 failed:",
        '[rank 0]   File "a.py", line 3 in f',
        "[rank 2] where it was when rank 1 failed:",
        '[rank 2]   File "b.py", line 4 in g',
    ]
    assert err.stacks == stacks and err.stacks is not stacks
    err.stacks[5] = "later"  # what is set afterwards is kept, the message is not redone
    assert "rank 5" not in str(err)
