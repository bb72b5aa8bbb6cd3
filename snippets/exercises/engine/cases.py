"""The cases a check runs: a check opens them, calls the reader's function in each and
compares with the oracle.

A check (``check(fn, grade)``, in ``snippets/exercises/checks/``) opens cases with
``with grade.case("7 elements") as case``, calls the reader's function through
``case.call`` (its calls watched, its raises stopping every rank) and compares with
``case.equal``, whose oracle is the one the project's own implementation passes: the
built-in collective, ``torch.softmax``, ``scaled_dot_product_attention``, a formula.
A failure names the first element that differs and, where the answer matches a known
mistake, its hint.

Each rank's :class:`Grade` keeps its cases and its current wait in a small file, so
nothing a rank knew is lost when it stops, however it stops.
"""

from __future__ import annotations

import contextlib
import json
import os
from typing import TYPE_CHECKING, Any, Callable, Iterator

import torch
import torch.distributed as dist

from snippets.exercises.engine.calls import (
    Call,
    Refused,
    Stuck,
    Watcher,
    is_timeout,
)
from snippets.exercises.engine.reader_file import reader_lines

if TYPE_CHECKING:
    from snippets.exercises.engine.exercise import Exercise


class Stop(Exception):
    """Raised on a rank to stop every rank: its state file says why."""


class Case:
    """One case on one rank: ``call`` the reader's function, then compare."""

    def __init__(self, grade: Grade, title: str) -> None:
        self.grade, self.title = grade, title
        self.failure: str | None = None
        self.detail: list[str] = []  # shown for the first failing case only
        self.calls: list[Call] = []
        self.on_raise = ""  # a line to add where the reader's code raises
        self.received_peak = 0  # the most bytes of received buffers alive at once

    def call(self, fn: Callable, *args: Any, **kwargs: Any) -> Any:
        """Run the reader's ``fn`` with its torch.distributed calls watched."""
        grade = self.grade
        with grade.watcher.watching(grade.exercise.point_to_point) as calls:
            try:
                return fn(*args, **kwargs)
            except (Refused, Stuck) as exc:
                self._stop(str(exc), reader_lines(exc.__traceback__, grade.path))
            except Exception as exc:
                if is_timeout(exc):  # a wait the watcher did not wrap
                    self._stop(f"it waited past the {grade.timeout_s:g} s timeout", [])
                lines = reader_lines(exc.__traceback__, grade.path)
                hint = [self.on_raise] if self.on_raise else []
                self._stop(f"it raised {type(exc).__name__}: {exc}", hint + lines)
            finally:
                self.calls = list(calls)
                self.received_peak = grade.watcher.received.peak

    def _stop(self, why: str, lines: list[str]) -> None:
        first = why.splitlines()[0] if why else why
        self.failure = first if len(first) <= 160 else first[:157] + "..."
        self.detail = lines
        self.grade.finish(self, stopped=True)
        raise Stop(why)

    def fail(self, why: str, *detail: str) -> None:
        """Record this case's failure (the first one counts) and go on."""
        if self.failure is None:
            self.failure, self.detail = why, list(detail)

    def number(self, got: Any, what: str) -> torch.Tensor | None:
        """``got`` as a float64 scalar, or None with the case failed: "the count is
        str, not a number"."""
        try:
            return torch.tensor(float(got), dtype=torch.float64)
        except (TypeError, ValueError):
            self.fail(f"{what} is {type(got).__name__}, not a number")
            return None

    def expect(self, condition: bool, why: str, *detail: str) -> bool:
        if not condition:
            self.fail(why, *detail)
        return bool(condition)

    def equal(
        self,
        got: Any,
        expected: torch.Tensor,
        what: str = "the result",
        *,
        atol: float = 0.0,
        rtol: float = 0.0,
        mistakes: tuple[tuple[Any, str], ...] = (),
        unwritten: float | None = None,
    ) -> bool:
        """``got`` equals ``expected`` (exactly unless a tolerance is given); else the
        first element that differs, expected against got, and the hint of the first
        known mistake (an alternative wrong answer) that ``got`` matches.
        ``unwritten`` is the value an output held before the reader's code ran: an
        element that still holds it is said to be never written."""
        if not isinstance(got, torch.Tensor):
            return self.expect(False, f"{what} is {type(got).__name__}, not a tensor")
        if got.shape != expected.shape:
            return self.expect(
                False,
                f"{what} has shape {tuple(got.shape)}, not {tuple(expected.shape)}",
            )
        got_c = got.detach().to(expected.dtype)
        close = torch.isclose(got_c, expected, rtol=rtol, atol=atol, equal_nan=True)
        if bool(close.all()):
            return True
        index = tuple(int(i) for i in (~close).nonzero()[0])
        at = f"[{', '.join(map(str, index))}]" if index else ""
        why = (
            f"{what}{at}: expected {expected[index].item():.6g}, "
            f"got {got_c[index].item():.6g}"
        )
        if unwritten is not None and got_c[index].item() == unwritten:
            why += f" ({unwritten:g} is what it held before: never written)"
        hints = [h for alt, h in mistakes if _matches(got_c, alt, rtol, atol)]
        self.fail(why, *(f"hint: {h}" for h in hints[:1]))
        return False


def _matches(got: torch.Tensor, alternative: Any, rtol: float, atol: float) -> bool:
    if callable(alternative):
        return bool(alternative(got))
    alternative = torch.as_tensor(alternative).to(got.dtype)
    return got.shape == alternative.shape and bool(
        torch.allclose(
            got, alternative, rtol=max(rtol, 1e-6), atol=atol, equal_nan=True
        )
    )


class Grade:
    """What one rank knows: its cases so far and what it waits on, kept in a file."""

    def __init__(
        self,
        exercise: Exercise,
        path: str,
        state_file: str | None,
        timeout_s: float,
    ) -> None:
        self.exercise, self.path, self.timeout_s = exercise, path, timeout_s
        self.state_file = state_file
        self.rank = dist.get_rank() if dist.is_initialized() else 0
        self.world_size = dist.get_world_size() if dist.is_initialized() else 1
        self.cases: list[dict] = []
        self.wait: str | None = None
        self.watcher = Watcher.install(self)

    @contextlib.contextmanager
    def case(self, title: str) -> Iterator[Case]:
        case = Case(self, title)
        yield case
        self.finish(case)

    def finish(self, case: Case, stopped: bool = False) -> None:
        record = {"title": case.title, "failure": case.failure, "detail": case.detail}
        self.cases.append(record | {"stopped": stopped})
        self.save()

    @contextlib.contextmanager
    def waiting(self, call: Call) -> Iterator[None]:
        lines = self.here()
        self.wait = f"{call}" + (f" at {lines[-1]}" if lines else "")
        self.save()
        try:
            yield
        except RuntimeError as exc:
            if is_timeout(exc):
                raise Stuck(
                    f"it waited past the {self.timeout_s:g} s timeout"
                ) from None
            raise
        self.wait = None
        self.save()

    def here(self) -> list[str]:
        return reader_lines(None, self.path)

    def save(self) -> None:
        if self.state_file is None:
            return
        tmp = self.state_file + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump({"cases": self.cases, "wait": self.wait}, f)
        os.replace(tmp, self.state_file)
