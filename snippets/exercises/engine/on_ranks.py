"""Launch a check on real ranks and merge what each rank reported into one outcome.

A distributed exercise runs its check on every rank over gloo (the project's one
launcher, :func:`snippets.core.runtime.launch`); an exception in the reader's code
stops every rank at once (the launcher's first-failure rule), and a wait that
outlasts the group's timeout ends the check. Each rank keeps its cases and its current
wait in a file of the state folder, read here after the ranks have stopped, however
they stopped: a case that failed on a rank names the rank that stopped first, not a
peer's echo of it. A single-process exercise runs in this process, stopped by an alarm
if it runs past the timeout.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import tempfile
from dataclasses import dataclass, field
from typing import Any

import torch.distributed as dist

from snippets.core.errors import RankError, UsageError
from snippets.core.first_cause import is_echo
from snippets.exercises.engine.calls import Stuck
from snippets.exercises.engine.cases import Grade, Stop
from snippets.exercises.engine.exercise import Exercise
from snippets.exercises.engine.reader_file import ImportFailed, load

DEFAULT_TIMEOUT_S = 20.0  # a wait longer than this on tiny tensors is a deadlock
ALONE_TIMES = 6  # a one-process exercise's cases get this many timeouts in all


@dataclass
class Outcome:
    """A check's result at one world size: each case merged over the ranks."""

    world_size: int
    cases: list[dict] = field(default_factory=list)  # title, failure, rank, detail
    stopped: str | None = None  # why the ranks stopped early
    waits: dict[int, str] = field(default_factory=dict)  # rank → what it waited on
    died: str | None = None  # a rank's process that ended without a word

    @property
    def passed(self) -> bool:
        failed = any(c["failure"] is not None for c in self.cases)
        return self.stopped is None and self.died is None and not failed

    def __or__(self, changes: dict) -> Outcome:
        return dataclasses.replace(self, **changes)


def _rank(ex: Exercise, path: str, state_dir: str, timeout_s: float) -> None:
    """Every rank's part of a check: load the reader's function, run the cases. The
    exercise travels by reference: its functions are imported by name in the rank."""
    rank = dist.get_rank() if dist.is_initialized() else 0
    grade = Grade(ex, path, os.path.join(state_dir, f"rank{rank}.json"), timeout_s)
    try:
        fn = load(ex, path)
    except ImportFailed as exc:
        grade.cases.append(
            {"title": "import", "failure": str(exc), "detail": [], "stopped": True}
        )
        grade.save()
        raise Stop(str(exc)) from None
    ex.check(fn, grade)


def check(
    exercise: Exercise, path: str, world_size: int, timeout_s: float = DEFAULT_TIMEOUT_S
) -> Outcome:
    """Grade ``path`` at one world size; the outcome merges every rank's cases."""
    load(exercise, path) if not exercise.distributed else _check_usage(exercise, path)
    with tempfile.TemporaryDirectory(prefix="commonplace-exercise-") as state_dir:
        if exercise.distributed:
            from snippets.core.runtime import fork_server_preload, launch

            preload = fork_server_preload(exercise.check)
            args = (exercise, os.path.abspath(path), state_dir, timeout_s)
            try:
                launch(_rank, world_size, "gloo", timeout_s, args, preload=preload)
            except Stop:  # one rank runs here, in this process
                pass
            except RankError as exc:
                if exc.usage is not None:
                    raise UsageError(exc.usage) from None
                if not os.listdir(state_dir):  # no rank got as far as its cases
                    raise
                if "without reporting" in exc.cause:  # killed, or aborted in C++
                    died = f"rank {exc.rank}'s process died: {exc.cause}"
                    return merge(state_dir, world_size) | {"died": died}
        else:
            _alone(exercise, path, state_dir, timeout_s)
        return merge(state_dir, world_size)


def _check_usage(exercise: Exercise, path: str) -> None:
    """Refuse bad input here, in one line, before any rank starts."""
    try:
        load(exercise, path)
    except ImportFailed:
        pass  # graded as a failure by the ranks, with its line


def _alone(exercise: Exercise, path: str, state_dir: str, timeout_s: float) -> None:
    """A single-process exercise, in this process, stopped by an alarm. One process
    waits on nobody: the alarm stops a loop that never ends, after ``ALONE_TIMES``
    the deadlock timeout for every case together, so that a slow or busy machine is
    not failed for its speed."""
    total_s = ALONE_TIMES * timeout_s

    def alarm(signum: int, frame: Any) -> None:
        raise Stuck(f"it ran past {total_s:g} s, the one-process time limit")

    previous = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, total_s)
    try:
        _rank(exercise, os.path.abspath(path), state_dir, timeout_s)
    except Stop:
        pass
    except Stuck as exc:  # the alarm rang in the grader's own part of a case
        with open(os.path.join(state_dir, "rank0.json"), "w", encoding="utf-8") as f:
            case = {"title": "timeout", "failure": str(exc), "detail": []}
            json.dump({"cases": [case | {"stopped": True}], "wait": None}, f)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def merge(state_dir: str, world_size: int) -> Outcome:
    outcome = Outcome(world_size)
    states = {}
    for rank in range(world_size):
        file = os.path.join(state_dir, f"rank{rank}.json")
        if os.path.exists(file):
            with open(file, encoding="utf-8") as f:
                states[rank] = json.load(f)
    titles: list[str] = []
    for state in states.values():
        for case in state["cases"]:
            if case["title"] not in titles:
                titles.append(case["title"])
    for title in titles:
        merged = {"title": title, "failure": None, "rank": None, "detail": []}
        found = [
            (rank, next((c for c in state["cases"] if c["title"] == title), None))
            for rank, state in sorted(states.items())
        ]
        failed = [
            (r, c) for r, c in found if c is not None and c["failure"] is not None
        ]
        # a peer's stop reaches a rank that waits on it as a closed connection: name
        # the rank that stopped first, not its echo
        failed.sort(key=lambda pair: is_echo(pair[1]["failure"]))
        if failed:
            rank, case = failed[0]
            merged |= {"failure": case["failure"], "rank": rank}
            merged["detail"] = case["detail"]
            if case["stopped"] and outcome.stopped is None:
                outcome.stopped = case["failure"]
        outcome.cases.append(merged)
    outcome.waits = {r: s["wait"] for r, s in states.items() if s.get("wait")}
    return outcome
