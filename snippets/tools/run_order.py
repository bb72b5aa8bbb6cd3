"""The order ``run-all`` runs snippets in: the snippets whose results one reads
(``SPEC.reads``) before it, timed ones alone, the rest side by side, and none on the
results of a producer that just failed.

:func:`producers_first` checks the declared reads and sorts the names;
:func:`run_in_order` runs the chosen snippets as soon as their producers are done.
"""

from __future__ import annotations

import difflib
import graphlib
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Any, Callable

from snippets.core.errors import UsageError


def producers_first(entries: dict[str, Any]) -> list[str]:
    """Every name, each after the snippets whose results it reads (``SPEC.reads``).

    A name in ``reads`` that is no snippet, or snippets that read each other's results
    round in a circle, are a one-line error."""
    for name, entry in entries.items():
        reads = entry.spec.reads
        if isinstance(reads, str) or not all(isinstance(r, str) for r in reads):
            raise UsageError(
                f"{name}: SPEC reads={reads!r} must be a tuple of snippet names, "
                "e.g. reads=('cost_model',)"
            )
        for read in reads:
            if read not in entries or read == name:
                close = difflib.get_close_matches(read, set(entries) - {name}, n=1)
                hint = f"; did you mean {close[0]!r}?" if close else ""
                what = "itself" if read == name else f"{read!r}, which is no snippet"
                raise UsageError(f"{name}: SPEC reads the results of {what}{hint}")
    graph = {name: tuple(e.spec.reads) for name, e in entries.items()}
    try:
        return list(graphlib.TopologicalSorter(graph).static_order())
    except graphlib.CycleError as exc:
        names = list(reversed(exc.args[1]))[1:]  # each reads the next, round
        first = names.index(min(names))
        circle = " reads ".join(names[first:] + names[: first + 1])
        raise UsageError(
            f"snippets read each other's results in a circle: {circle}; "
            "drop one name from a SPEC's reads"
        ) from None


def not_run_because(chain: list[str]) -> str:
    """Why a reader did not run, from the producer that failed down to the one it
    reads itself: ``["a"]`` or ``["a", "b", ...]``."""
    via = f" via {', '.join(chain[1:])}" if chain[1:] else ""
    return f"not run: {chain[0]} failed (it reads its results{via})"


def run_in_order(
    entries: list,
    jobs: int,
    one: Callable[[Any], bool],
    show: Callable[[str], Any],
    skip: Callable[[Any, list[str]], Any],
) -> None:
    """``one(entry)`` (True if it passed) for every entry, none before the entries
    named in its ``SPEC.reads`` have finished. Timed entries run first whenever one
    is ready, with nothing beside them; the others run up to ``jobs`` at a time.

    An entry that reads the results of one that failed, or was not run, is not run:
    ``skip(entry, chain)`` is called instead, with the names from the one that failed
    down to the producer the entry reads (see :func:`not_run_because`)."""
    waiting = list(entries)
    names = {e.name for e in entries}
    done: set[str] = set()
    lost: dict[str, list[str]] = {}  # failed: [], not run: the chain to the failure
    running: dict[Future, Any] = {}
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        while waiting or running:
            ready = [
                e
                for e in waiting
                if all(r in done or r not in names for r in e.spec.reads)
            ]
            blocked = [e for e in ready if any(r in lost for r in e.spec.reads)]
            for entry in blocked:
                producer = next(r for r in entry.spec.reads if r in lost)
                lost[entry.name] = lost[producer] + [producer]
                waiting.remove(entry)
                done.add(entry.name)
                skip(entry, lost[entry.name])
            if blocked:
                continue  # its own readers may now be ready to be skipped too
            timed = [e for e in ready if e.spec.timed]
            alone = any(e.spec.timed for e in running.values())
            if timed and not running:
                start = timed[:1]
            elif timed or alone:
                start = []  # a timed one runs, or waits for the machine to be quiet
            else:
                start = ready[: jobs - len(running)]
            for entry in start:
                waiting.remove(entry)
                show(entry.name if entry.spec.timed else f"{jobs} at a time")
                running[pool.submit(one, entry)] = entry
            if not running:  # producers_first refused circles, so this cannot be
                raise RuntimeError(f"nothing can start: {[e.name for e in waiting]}")
            finished, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in finished:
                entry = running.pop(future)
                done.add(entry.name)
                if not future.result():  # a crash in the runner is not swallowed
                    lost[entry.name] = []
