"""run_order: a snippet runs after the snippets whose results it reads; when one of
them fails, it and every snippet reading it in turn are skipped, with the failure
named, and nothing else is held back."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

import pytest

from snippets.core.runtime import Spec
from snippets.tools import run_order


def stand_ins(**reads: tuple[str, ...]) -> list[SimpleNamespace]:
    return [
        SimpleNamespace(name=n, spec=Spec(summary=n, timed=n.endswith("_t"), reads=r))
        for n, r in sorted(reads.items())
    ]


def run(entries, failing: set[str], jobs: int = 2):
    """Run the stand-ins, those in ``failing`` failing after a short while; return
    when each ran or was skipped (a counter), and the chains skip was given."""
    clock, lock = iter(range(1000)), threading.Lock()
    ran: dict[str, tuple[int, int]] = {}
    skipped: dict[str, tuple[int, list[str]]] = {}

    def one(entry) -> bool:
        with lock:
            start = next(clock)
        time.sleep(0.05)
        with lock:
            ran[entry.name] = (start, next(clock))
        return entry.name not in failing

    def skip(entry, chain) -> None:
        with lock:
            skipped[entry.name] = (next(clock), chain)

    run_order.run_in_order(entries, jobs, one, lambda text: None, skip)
    return ran, skipped


def test_readers_of_a_failure_are_skipped_and_the_rest_run() -> None:
    """a_t fails: b (reads it), c (reads b) and d (reads a_t and the good e) are
    skipped, each only after a_t finished; e, f (reads e) and g run."""
    entries = stand_ins(
        a_t=(), b=("a_t",), c=("b",), d=("e", "a_t"), e=(), f=("e",), g=()
    )
    ran, skipped = run(entries, failing={"a_t"})
    assert set(ran) == {"a_t", "e", "f", "g"}
    assert {n: chain for n, (_, chain) in skipped.items()} == {
        "b": ["a_t"],
        "c": ["a_t", "b"],
        "d": ["a_t"],
    }
    for name, (at, _) in skipped.items():
        assert at > ran["a_t"][1], name
    assert ran["f"][0] > ran["e"][1]


def test_a_failure_with_no_readers_holds_nothing_back() -> None:
    entries = stand_ins(a=(), b=("c",), c=(), d_t=("c",))
    ran, skipped = run(entries, failing={"a"})
    assert set(ran) == {"a", "b", "c", "d_t"} and skipped == {}


@pytest.mark.parametrize(
    ("chain", "says"),
    [
        (["fit"], "not run: fit failed (it reads its results)"),
        (["fit", "page"], "not run: fit failed (it reads its results via page)"),
        (["a", "b", "c"], "not run: a failed (it reads its results via b, c)"),
    ],
)
def test_why_a_reader_did_not_run(chain, says) -> None:
    assert run_order.not_run_because(chain) == says


def test_a_crash_in_the_runner_is_not_swallowed() -> None:
    def one(entry) -> bool:
        raise KeyError(entry.name)

    with pytest.raises(KeyError, match="'a'"):
        run_order.run_in_order(stand_ins(a=()), 1, one, print, print)
