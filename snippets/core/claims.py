"""Claims bound to data: a sentence that compares measured numbers holds on this run.

A note may compare measured numbers only in two ways. Either the sentence is
*rendered* from the run's results (``Spread``, ``compare``, ``verdict`` turn two
samples into "faster", "slower" or "not separated by the spread"), or it is fixed text
that the snippet *checks* (``Claim``): ``check`` raises :class:`ClaimFailed`, naming
the sentence, when the run contradicts it, so ``run-all`` fails instead of publishing
a note its own tables disprove.

The rule for a ranking: two samples are separated only where their interquartile
ranges (inclusive quartiles, as ``statistics.quantiles(method="inclusive")``) do not
overlap. A median alone never ranks two things: on a shared machine, two medians from
overlapping ranges swap places from one run to the next.
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


class ClaimFailed(AssertionError):
    """A sentence a note states that this run contradicts."""


@dataclass(frozen=True)
class Claim:
    """A sentence template and the predicate over the results that makes it true.

    ``text`` is formatted with the same mapping ``holds`` reads, so the sentence in
    the error names the numbers that broke it."""

    text: str
    holds: Callable[[Mapping[str, Any]], bool]

    def render(self, data: Mapping[str, Any]) -> str:
        return self.text.format_map(data)


def check(claims: Sequence[Claim], data: Mapping[str, Any]) -> list[str]:
    """Every claim's sentence, rendered; ClaimFailed naming each one that is false."""
    false = [c.render(data) for c in claims if not c.holds(data)]
    if false:
        raise ClaimFailed(
            f"{len(false)} claim(s) contradicted by this run: " + "; ".join(false)
        )
    return [c.render(data) for c in claims]
