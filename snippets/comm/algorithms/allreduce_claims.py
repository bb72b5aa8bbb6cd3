"""What the cost model and the all-reduce benchmark may say, from this run's numbers.

Two kinds of sentence (``snippets.core.claims``): ``model_claims`` says how the fit
came out (observations, a sentence for each outcome) and checks what the model's
formulas imply whatever the fit (laws, which fail the run when broken); and
comparisons of measured times, which ``findings`` writes from the
records so that they rank only what the spread separates. "Faster" and "slower" are
the paired ratio's IQR (built-in ÷ ours over interleaved rounds) lying wholly above or
below 1, or two such IQRs not overlapping. The two fits of the benchmark are named
apart: the *idle* fit (a ping-pong between two ranks while the others wait) and the
*busy* fit (a ring exchange, every rank sending at once).
"""

from __future__ import annotations

import statistics
from typing import Sequence

from snippets.core.claims import (
    FASTER,
    SLOWER,
    TIED,
    Law,
    Observation,
    Spread,
    check,
    order,
    verdict,
)
from snippets.core.timing import spread
from snippets.sizing.cost_formulas import Machine, predict, size_text

FITS = {"ping_pong": "idle", "ring": "busy"}  # pattern → the name the note uses
WHAT = {"ping_pong": "ping-pong, ranks 0 and 1", "ring": "ring exchange, every rank"}
TARGET = 0.9  # our ring ÷ the built-in's busbw, at 64 MiB on 2 ranks
OUTCOME = {
    FASTER: "met: the whole IQR lies above it",
    SLOWER: "missed: the whole IQR lies below it",
    TIED: "not settled: the IQR straddles it",
}


def target_outcome(ratio: Spread) -> str:
    """The target's outcome ("met: …", "missed: …", "not settled: …") on this run's
    paired ratio: its IQR against TARGET (``snippets.core.claims.verdict``)."""
    return OUTCOME[verdict(ratio, TARGET)]


FIT_CLAIMS = [
    Observation(
        says={
            "positive": "α > 0 and β > 0",
            "not": "the fit gave α = {alpha:.2g} s and β = {beta:.2g} s/B: a term that "
            "is not positive, so this run's line explains little",
        },
        judge=lambda f: "positive" if f["alpha"] > 0 and f["beta"] > 0 else "not",
        cases={
            "positive": {"alpha": 2e-5, "beta": 1e-9},
            "not": {"alpha": -1e-6, "beta": 1e-9},
        },
    ),
    Observation(
        says={
            "inside": "α + mβ is within the rounds' range at {inside} of {n} sizes "
            "(their IQR: {iqr}), a majority",
            "outside": "α + mβ is within the rounds' range at only {inside} of {n} "
            "sizes (their IQR: {iqr}): on this run the line misses most of them",
        },
        judge=lambda f: "inside" if f["inside"] > f["n"] / 2 else "outside",
        cases={
            "inside": {"inside": 9, "iqr": 6, "n": 11},
            "outside": {"inside": 2, "iqr": 0, "n": 11},
        },
    ),
    Law(
        "halving/doubling never loses to the ring when p is a power of 2",
        lambda f: f["hd"],
    ),
    Observation(
        says={
            "naive": "naive_everyone beats the ring at 4 bytes",
            "ring": "with this run's α and β the ring beats naive_everyone at 4 bytes "
            "for some p up to 1,024",
        },
        judge=lambda f: "naive" if f["naive"] else "ring",
        cases={"naive": {"naive": True}, "ring": {"naive": False}},
    ),
]


def model_claims(m: Machine, sizes: Sequence[int], rounds: Sequence[list]) -> list:
    """The note's sentences on the fit and the model, from this run. The fit's test
    is the noise itself: does the line pass between the fastest and the slowest round
    at most sizes? A busier machine widens the band it has to hit, and a miss is said,
    not failed: the fit is what this machine measured. That halving/doubling never
    loses to the ring for a power of 2 is a law: log₂ p ≤ p − 1 for any α, β ≥ 0."""
    line = [m.alpha + s * m.beta for s in sizes]
    powers, sizes_n = [2**k for k in range(1, 11)], [2**e for e in range(2, 31, 4)]
    positive = Machine(max(m.alpha, 0.0), max(m.beta, 0.0), max(m.gamma, 0.0))
    facts = {
        "alpha": m.alpha,
        "beta": m.beta,
        "inside": sum(min(r) <= t <= max(r) for t, r in zip(line, rounds)),
        "iqr": sum(q.lo <= t <= q.hi for t, q in zip(line, map(Spread.of, rounds))),
        "n": len(sizes),
        "hd": all(
            predict("halving_doubling", p, n, positive)
            <= predict("ring", p, n, positive)
            for p in powers
            for n in sizes_n
        ),
        "naive": all(
            predict("naive_everyone", p, 4, m) < predict("ring", p, 4, m)
            for p in range(2, 1025)
        ),
    }
    return check(FIT_CLAIMS, facts)


def median_error(predicted: Sequence[float], measured: Sequence[float]) -> float:
    """The median of |predicted − measured| / measured."""
    return statistics.median(abs(p - t) / t for p, t in zip(predicted, measured))


def fit_errors(machines: dict, samples: dict, records: list[dict]) -> list[dict]:
    """Each fit beside what it explains: the median error of α + mβ on the points it
    was fitted to (``own``), and of its predictions of the all-reduces (``sweep``)."""
    fits = []
    for pattern, m in machines.items():
        sizes, own = samples[pattern]["sizes"], samples[pattern][f"{pattern}_s"]
        swept = [r for r in records if r.get(f"predicted_{pattern}_s")]
        fits.append(
            {
                "fit": FITS[pattern],
                "what": WHAT[pattern],
                "alpha_s": m.alpha,
                "beta_s_per_byte": m.beta,
                "own": median_error([m.alpha + s * m.beta for s in sizes], own),
                "sweep": median_error(
                    [r[f"predicted_{pattern}_s"] for r in swept],
                    [r["time_s"] for r in swept],
                ),
            }
        )
    return fits


def fit_row(f: dict) -> dict:
    """One fit as the note's table shows it: its errors (its α and β are in the run's
    printout, which the note shows first)."""
    return {
        "fit": f["fit"],
        "measured by": f["what"],
        "median error, its own points": f"{f['own']:.0%}",
        "median error, the all-reduces": f"{f['sweep']:.0%}",
    }


def fits_said(fits: list[dict]) -> list[str]:
    """What this run says of each fit: how well it fits the points it was measured on
    and how well it predicts the all-reduces. Which of the two is worse moves from run
    to run on a shared machine, so it is rendered, not asserted."""
    said = []
    for f in fits:
        worse = f["sweep"] > f["own"]
        how = "less well than" if worse else "as well as or better than"
        said.append(
            f"The {f['fit']} fit predicts the all-reduces {how} it fits the "
            f"{f['what']} it was measured on (median error {f['sweep']:.0%} against "
            f"{f['own']:.0%})."
        )
    return said


def ratio_of(r: dict) -> Spread:
    """The paired ratio the findings rank: the built-in's time ÷ ours, per round."""
    return spread(r, "speedup")


def names(items: Sequence[str]) -> str:
    return ", ".join(items) if items else "none"


def versus_builtin(at: list[dict]) -> str:
    """One size: which of ours the spread puts ahead of or behind the built-in."""
    by = {FASTER: [], SLOWER: []}
    for r in at:
        by.get(verdict(ratio_of(r)), []).append(r["algorithm"])
    rest = len(at) - len(by[FASTER]) - len(by[SLOWER])
    return (
        f"- At {size_text(at[0]['size_bytes'])}, faster than the built-in beyond "
        f"the spread: {names(by[FASTER])}; slower: {names(by[SLOWER])}; "
        f"not separated: {rest} of {len(at)}."
    )


def builtin_spread(at: list[dict]) -> Spread:
    """Every round of the built-in at one size, over all the pairings."""
    return Spread.of([t for r in at for t in r.get("baseline_times_s", [])])


def builtin_row(at: list[dict], idle: Machine) -> dict:
    """The built-in's own time at one size: the baseline, with its spread."""
    s, p = builtin_spread(at), at[0]["world_size"]
    medians = [r["baseline_time_s"] * 1e3 for r in at]
    return {
        "size": size_text(at[0]["size_bytes"]),
        "built-in (ms)": s.text(3, 1e3),
        "its medians per pairing (ms)": f"{min(medians):.3g}–{max(medians):.3g}",
        "CPU per call (ms)": statistics.mean(r["baseline_cpu_s"] for r in at) * 1e3,
        "idle fit's ring (ms)": predict("ring", p, at[0]["size_bytes"], idle) * 1e3,
    }


def _fit_line(records: list[dict], fit: str) -> str:
    pred = [(r, r[f"predicted_{fit}_s"] / r["time_s"]) for r in records]
    over = [f"{r['algorithm']} at {size_text(r['size_bytes'])}" for r, x in pred]
    over = [o for o, (_, x) in zip(over, pred) if x >= 1]
    error = statistics.median(abs(x - 1) for _, x in pred)
    exceptions = f" (not for {names(over)})" if 0 < len(over) <= 4 else ""
    return (
        f"- The {FITS[fit]} fit predicts less than was measured for "
        f"{len(pred) - len(over)} of {len(pred)} points{exceptions}; its median "
        f"error is {error:.0%}."
    )


def hd_cell(size: int, at: list[dict]) -> str | None:
    """Halving/doubling against our ring at one size, as the spread has it."""
    by = {r["algorithm"]: r for r in at}
    if not {"ring", "halving_doubling"} <= set(by):
        return None
    hd, ring = by["halving_doubling"], by["ring"]
    word = {-1: "slower", 0: "not separated", 1: "faster"}[
        order(ratio_of(hd), ratio_of(ring))
    ]
    return f"{size_text(size)} {word} (CPU per call {hd['cpu_s'] / ring['cpu_s']:.2g}×)"


def waiting(size: int, at: list[dict]) -> str | None:
    """'4.7× at 4 KiB' where even the built-in's first quartile of wall time is over
    twice its CPU seconds per call; None where it is not, or was not recorded."""
    if not at[0].get("baseline_times_s"):
        return None
    wall, cpu = builtin_spread(at), statistics.mean(r["baseline_cpu_s"] for r in at)
    return (
        f"{wall.median / cpu:.2g}× at {size_text(size)}" if wall.lo > 2 * cpu else None
    )


def findings(records: list[dict], machines: dict, target: list[dict]) -> str:
    """The sentences of the note that compare measured numbers, from this run."""
    idle, busy = machines["ping_pong"], machines["ring"]
    lines = [
        f"- Busy ranks against idle ones: the busy fit's α is "
        f"{busy.alpha / idle.alpha:.2g}× the idle fit's, its β "
        f"{busy.beta / idle.beta:.2g}×."
    ]
    lines += [_fit_line(records, fit) for fit in FITS]
    sizes = sorted({r["size_bytes"] for r in records})
    at = {s: [r for r in records if r["size_bytes"] == s] for s in sizes}
    lines += [versus_builtin(at[s]) for s in sizes]
    cells = [hd_cell(s, at[s]) for s in sizes]
    if cells := [c for c in cells if c]:
        lines.append(
            "- Measured, halving/doubling against our ring (their paired ratios' "
            "IQRs): " + "; ".join(cells) + "."
        )
    waits = [waiting(s, at[s]) for s in sizes]
    if waits := [w for w in waits if w]:
        lines.append(
            f"- The built-in's wall time is {', '.join(waits)} its CPU per call: "
            "most of such a call is waiting, so ratios there measure the scheduler "
            "as much as the algorithms."
        )
    for row in target:
        lo, hi = (float(q) for q in row["IQR"].split("–"))
        ratio = Spread(row["ring ÷ built-in"], lo, hi)
        goal = f"; against the {TARGET}× target: {target_outcome(ratio)}"
        lines.append(
            f"- At {row['size']} on {row['ranks']} ranks our ring's CPU per call is "
            f"{row['CPU per call, ring ÷ built-in']:.2f}× the built-in's; its wall "
            f"time ratio is {row['ring ÷ built-in']:.2f} (IQR {row['IQR']})"
            f"{goal if row['ranks'] == 2 else ''}."
        )
    return "\n".join(lines)
