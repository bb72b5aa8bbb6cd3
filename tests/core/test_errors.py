"""The two error kinds: what they are, and what a RankError says and carries."""

from __future__ import annotations

import pytest

from snippets.core.errors import RankError, UsageError


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
