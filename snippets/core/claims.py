"""Two kinds of check, and the sentences they make: laws, which fail a run, and
observations, which a run reports whichever way they came out.

- A **law** holds on any machine that runs the code correctly: an exact equality
  (``torch.equal`` against one process), an exact count (messages, bytes, calls), a
  formula against a count, a proved bound. :class:`Law` is a sentence with the
  predicate that makes it true; :func:`law` is the same, inline. A broken law raises
  :class:`LawBroken`, naming the sentence, and ``run-all`` fails rather than publish a
  note its own tables disprove. (Never a bare ``assert``: ``python -O`` drops those.)
- An **observation** is what this machine measured: a ratio of times, a ranking, a
  growth, a magnitude of rounding. :class:`Observation` has one sentence for every
  outcome and a judge that picks the outcome from the run's numbers; it never fails a
  run, because a reader's CPU is not ours. Its ``cases`` give, for every outcome, the
  numbers that produce it, so a test can feed each one and read the sentence back.

Measured times are ranked by ``Spread``, ``compare`` and ``verdict``: two samples are
separated only where their interquartile ranges (inclusive quartiles, as
``statistics.quantiles(method="inclusive")``) do not overlap. A median alone never
ranks two things: on a shared machine, two medians from overlapping ranges swap places
from one run to the next.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any, Callable, Mapping, NamedTuple, Sequence

FASTER, SLOWER, TIED = "faster", "slower", "not separated by the spread"


class Spread(NamedTuple):
    median: float
    lo: float  # first quartile
    hi: float  # third quartile

    @classmethod
    def of(cls, values: Sequence[float]) -> Spread:
        """Median and inclusive quartiles; one value is its own spread."""
        if not values:
            raise ValueError("a spread needs at least one value")
        if len(values) < 2:
            return cls(values[0], values[0], values[0])
        q1, q2, q3 = statistics.quantiles(values, n=4, method="inclusive")
        return cls(q2, q1, q3)

    def text(self, digits: int = 2, scale: float = 1.0) -> str:
        """'1.23 [1.01–1.40]': the median, then the IQR in brackets."""
        m, lo, hi = (x * scale for x in self)
        return f"{m:.{digits}f} [{lo:.{digits}f}–{hi:.{digits}f}]"


def signed(x: float, digits: int = 2) -> str:
    """'+0.12', '-0.12', and '0.00' for anything that rounds to zero: never '-0.00'."""
    text = f"{x:+.{digits}f}"
    return text[1:] if float(text) == 0 else text


# --8<-- [start:rule]
def order(a: Spread, b: Spread) -> int:
    """-1 if a's IQR lies wholly below b's, 1 if wholly above, 0 if they overlap."""
    if a.hi < b.lo:
        return -1
    if a.lo > b.hi:
        return 1
    return 0


def compare(a: Sequence[float] | Spread, b: Sequence[float] | Spread) -> str:
    """Two samples of times (smaller is better): is a faster, slower, or neither?"""
    sa = a if isinstance(a, Spread) else Spread.of(a)
    sb = b if isinstance(b, Spread) else Spread.of(b)
    return {-1: FASTER, 0: TIED, 1: SLOWER}[order(sa, sb)]


def verdict(ratio: Spread, one: float = 1.0) -> str:
    """A speed-up ratio (theirs ÷ ours; above 1, ours is faster) against 1: "faster"
    only if its whole IQR lies above it, "slower" only if wholly below."""
    return compare(Spread(one, one, one), ratio)


# --8<-- [end:rule]


# --8<-- [start:ratio]
def ratio_sentence(ratios: Sequence[float], name: str, above: str, below: str) -> str:
    """A paired ratio, one per round, as the note says it: median, IQR, and ``above``
    or ``below`` only where the whole IQR lies on that side of 1."""
    spread = Spread.of(ratios)
    side = verdict(spread)  # FASTER: the whole IQR lies above 1
    said = (
        f"{above}: the whole IQR lies above 1"
        if side == FASTER
        else f"{below}: the whole IQR lies below 1"
        if side == SLOWER
        else "not separated: the IQR reaches 1"
    )
    return f"{name}: {spread.text()} (median [IQR] of {len(ratios)} rounds); {said}."


# --8<-- [end:ratio]


class LawBroken(AssertionError):
    """A law this run broke: the code, not the machine, is wrong."""


def law(holds: bool, what: object) -> None:
    """A law stated inline: raise :class:`LawBroken` with ``what`` unless it holds."""
    if not holds:
        raise LawBroken(what)


@dataclass(frozen=True)
class Law:
    """A sentence template and the predicate over the results that makes it true.

    ``text`` is formatted with the same mapping ``holds`` reads, so the sentence in
    the error names the numbers that broke it."""

    text: str
    holds: Callable[[Mapping[str, Any]], bool]

    def render(self, data: Mapping[str, Any]) -> str:
        return self.text.format_map(data)


@dataclass(frozen=True)
class Observation:
    """What this run measured, with a sentence for every way it can come out.

    ``judge`` reads the run's numbers and names the outcome; ``says`` maps each
    outcome to its sentence template (formatted with the same numbers); ``cases``
    maps each outcome to numbers that give it, for the tests and for a reader who
    wants to see what the other outcome would have said."""

    says: Mapping[str, str]
    judge: Callable[[Mapping[str, Any]], str]
    cases: Mapping[str, Mapping[str, Any]]

    def __post_init__(self) -> None:
        if len(self.says) < 2:
            raise ValueError("an observation has at least two outcomes")
        if set(self.cases) != set(self.says):
            raise ValueError(
                f"cases for {sorted(self.cases)}, sentences for {sorted(self.says)}"
            )

    def outcome(self, data: Mapping[str, Any]) -> str:
        found = self.judge(data)
        if found not in self.says:
            raise ValueError(f"outcome {found!r} has no sentence: {sorted(self.says)}")
        return found

    def render(self, data: Mapping[str, Any]) -> str:
        return self.says[self.outcome(data)].format_map(data)


Check = Law | Observation


def check(checks: Sequence[Check], data: Mapping[str, Any]) -> list[str]:
    """Every sentence, rendered in order: each observation says what this run found;
    :class:`LawBroken` names every law the run broke."""
    broken = [
        c.render(data) for c in checks if isinstance(c, Law) and not c.holds(data)
    ]
    if broken:
        raise LawBroken(
            f"{len(broken)} law(s) broken by this run: " + "; ".join(broken)
        )
    return [c.render(data) for c in checks]
