"""How the charts look: series colours, dashes, fonts, the two colour schemes, and how
numbers are written on axes and in tooltips (bytes in binary units, times in s, ms,
µs or ns, never "1e+1"), where log axes put their ticks, and how titles wrap.

``snippets.core.charts`` writes ``LIGHT`` into every spec's config and ``DARK`` into
its ``usermeta``; the page merges ``DARK`` over the config when Material's scheme is
slate. Series colours are the same in both schemes, so a line keeps its colour when the
reader switches.
"""

from __future__ import annotations

import json
import math
import textwrap

LIGHT_BACKGROUND = "#ffffff"  # Material's default scheme
DARK_BACKGROUND = "#1e2129"  # Material's slate: hsl(225deg, 15%, 14%)

# Each colour's WCAG contrast is >= 3.3 against #ffffff and against #1e2129.
PALETTE = [
    "#1f77b4",  # blue
    "#cc6a00",  # orange
    "#2a9a2a",  # green
    "#e0452f",  # red
    "#9467bd",  # purple
    "#13939f",  # teal
    "#c9489f",  # pink
    "#a36b5e",  # brown
    "#808080",  # grey
]
MODEL_DASH, MEASURED_DASH = [6, 4], [1, 0]
FONT = "system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif"
TITLE_WIDTH = 34  # characters per title line: fits a 390 px phone at 14 px bold
TITLE_CHAR_PX = 8  # a generous average width of one 14 px bold character
PAD = 10  # pixels between the outermost point of a line chart and the plot's edge

LIGHT = {  # the spec's own config: text and rules for a light page
    "background": "transparent",  # the page shows through
    "font": FONT,
    "padding": 4,
    "view": {"stroke": None},
    "title": {"fontSize": 14, "anchor": "start", "color": "#222222", "offset": 8},
    "axis": {
        "labelFontSize": 11,
        "labelSeparation": 6,  # labels that would come closer than this are hidden
        "titleFontSize": 12,
        "labelColor": "#333333",
        "titleColor": "#222222",
        "gridColor": "#dddddd",
        "domainColor": "#888888",
        "tickColor": "#888888",
    },
    "legend": {
        "labelFontSize": 11,
        "titleFontSize": 12,
        "labelColor": "#333333",
        "titleColor": "#222222",
        "labelLimit": 220,
    },
}
DARK = {  # what the page merges over LIGHT when Material's scheme is slate
    "title": {"color": "#e8e8ec"},
    "axis": {
        "labelColor": "#c8c8d0",
        "titleColor": "#e8e8ec",
        "gridColor": "#3a3e4a",
        "domainColor": "#8a8e9a",
        "tickColor": "#8a8e9a",
    },
    "legend": {"labelColor": "#c8c8d0", "titleColor": "#e8e8ec"},
}


# --- numbers on axes and in tooltips ---

# unit -> (one of its values in the base unit, the base unit's ladder, largest first):
# "B" and "MiB" are amounts of bytes, "s" and "ms" times
_BYTES = ((2.0**40, "TiB"), (2.0**30, "GiB"), (2.0**20, "MiB"), (2.0**10, "KiB"),
          (1.0, "B"))  # fmt: skip
_TIMES = ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs"), (1e-9, "ns"))
UNITS = {"B": (1.0, _BYTES), "MiB": (2.0**20, _BYTES), "s": (1.0, _TIMES),
         "ms": (1e-3, _TIMES)}  # fmt: skip


def number_expr(value: str, unit: str | None, digits: int = 3) -> str:
    """A Vega expression writing the number ``value`` (an expression) in ``unit``:
    "B" and "MiB" give 64 KiB, "s" and "ms" give 1.5 ms or 700 µs, None a plain
    number (12.5, 0.25, and 12k from 10,000 up). ``digits`` significant digits,
    trailing zeros dropped; zero is "0"."""
    spec = f"'.{digits}~r'"
    if unit is None:
        return f"abs({value}) >= 1e4 ? format({value}, '.{digits}~s') : " + (
            f"format({value}, {spec})"
        )
    if unit not in UNITS:
        raise ValueError(f"unit {unit!r}: use one of {sorted(UNITS)} or None")
    scale, ladder = UNITS[unit]

    def within(size: float) -> float:  # one ``size`` in the values' unit
        return float(f"{size / scale:.15g}")  # 1e-6 / 1e-3 is 0.001, not 0.000999…

    def rung(size: float, name: str) -> str:
        v = value if within(size) == 1 else f"{value} / {within(size)!r}"
        return f"format({v}, {spec}) + ' {name}'"

    out = rung(*ladder[-1])
    for size, name in reversed(ladder[:-1]):
        out = f"abs({value}) >= {within(size)!r} ? {rung(size, name)} : {out}"
    return f"{value} === 0 ? '0' : {out}"


def log_ticks(lo: float, hi: float, unit: str | None, most: int) -> list[float]:
    """At most ``most`` ticks in [lo, hi] on a log axis, evenly spaced: powers of 2
    whose exponents step by 1, 2, 3, 4, 5, 10 or 20 for bytes (from a step of 5 on,
    1 KiB and 1 MiB are among them), else 1-2-5 in each decade, 1-3, or every
    first, second, third… decade. Empty when not even two fit (the axis picks its
    own)."""
    if not 0 < lo <= hi:
        raise ValueError(f"log ticks need 0 < lo <= hi, got {lo}, {hi}")
    scale = UNITS[unit][0] if unit else 1.0
    lo, hi = lo * scale, hi * scale  # in the base unit: decades of seconds, not ms

    def inside(xs: list[float]) -> list[float]:
        return [x / scale for x in xs if lo * (1 - 1e-9) <= x <= hi * (1 + 1e-9)]

    if unit and UNITS[unit][1] is _BYTES:
        e_lo, e_hi = math.ceil(math.log2(lo) - 1e-9), math.floor(math.log2(hi) + 1e-9)
        for step in (1, 2, 3, 4, 5, 10, 20):
            first = -(-e_lo // step) * step
            ticks = inside([2.0**e for e in range(first, e_hi + 1, step)])
            if 2 <= len(ticks) <= most:
                return ticks
        return []
    d_lo, d_hi = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    for mantissas in ((1, 2, 5), (1, 3)):
        ticks = inside(
            [float(f"{m}e{d}") for d in range(d_lo, d_hi + 1) for m in mantissas]
        )
        if 2 <= len(ticks) <= most:
            return ticks
    for step in range(1, d_hi - d_lo + 2):
        first = -(-d_lo // step) * step
        ticks = inside([float(f"1e{d}") for d in range(first, d_hi + 1, step)])
        if 2 <= len(ticks) <= most:
            return ticks
    return []


def wrapped_title(text: str) -> dict:
    """The title's lines for the width the plot has: one line when it fits, else
    wrapped to fewer characters a line, down to ``TITLE_WIDTH`` (a phone). A Vega
    expression in the plot's ``width``; each choice is a JSON array of lines."""
    choices: list[tuple[int, list[str]]] = []
    for chars in (len(text), 90, 75, 60, 48, TITLE_WIDTH):
        lines = textwrap.wrap(text, chars) or [""]
        if not choices or lines != choices[-1][1]:
            choices.append((TITLE_CHAR_PX * max(map(len, lines)), lines))
    expr = json.dumps(choices[-1][1], ensure_ascii=False)
    for need, lines in reversed(choices[:-1]):
        expr = f"width >= {need} ? {json.dumps(lines, ensure_ascii=False)} : {expr}"
    return {"expr": expr}
