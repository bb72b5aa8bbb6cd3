"""Small, dependency-free SVG figures for results: a line chart and a heatmap.

The notes inline these (no plotting library, no fonts fetched): colours come from CSS
custom properties with fallbacks, so they follow the site's light and dark schemes.
"""

from __future__ import annotations

import html
import math
from typing import Sequence

PALETTE = [
    "#1f77b4",
    "#d62728",
    "#2ca02c",
    "#9467bd",
    "#ff7f0e",
    "#17becf",
    "#8c564b",
    "#e377c2",
]
_TEXT = 'fill="currentColor" font-family="system-ui, sans-serif" font-size="12"'


def _ticks(lo: float, hi: float, log: bool) -> list[float]:
    if log:
        return [
            10.0**e
            for e in range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1)
        ]
    step = 10 ** math.floor(math.log10((hi - lo) or 1))
    if (hi - lo) / step < 4:
        step /= 2
    start = math.floor(lo / step) * step
    return [start + i * step for i in range(int((hi - start) / step) + 2)]


def _fmt(v: float) -> str:
    if v == 0:
        return "0"
    for unit, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(v) >= scale:
            return f"{v / scale:g}{unit}"
    return f"{v:.3g}"


def line_chart(
    series: dict[str, Sequence[tuple[float, float]]],
    *,
    title: str,
    x_label: str,
    y_label: str,
    log_x: bool = False,
    log_y: bool = False,
    dashed: Sequence[str] = (),
    width: int = 640,
    height: int = 360,
) -> str:
    """Lines through (x, y) points, one per series name; names in ``dashed`` are drawn dashed
    (e.g. a model's prediction beside the measurement)."""
    pts = [p for s in series.values() for p in s]
    xs, ys = [p[0] for p in pts], [p[1] for p in pts]
    x0, x1 = min(xs), max(xs)
    y0, y1 = (min(ys), max(ys)) if log_y else (min(0.0, min(ys)), max(ys))
    xt, yt = _ticks(x0, x1, log_x), _ticks(y0, y1 or 1, log_y)
    x0, x1 = min(x0, xt[0]) if log_x else x0, max(x1, xt[-1]) if log_x else x1
    y0, y1 = min(y0, yt[0]), max(y1, yt[-1])
    left, right, top, bottom = 64, 150, 28, 44
    pw, ph = width - left - right, height - top - bottom

    def sx(x: float) -> float:
        t = (
            (math.log10(x) - math.log10(x0)) / ((math.log10(x1) - math.log10(x0)) or 1)
            if log_x
            else (x - x0) / ((x1 - x0) or 1)
        )
        return left + t * pw

    def sy(y: float) -> float:
        t = (
            (math.log10(y) - math.log10(y0)) / ((math.log10(y1) - math.log10(y0)) or 1)
            if log_y
            else (y - y0) / ((y1 - y0) or 1)
        )
        return top + ph - t * ph

    # width/height give the figure an intrinsic size (a fit-content <figure> would otherwise
    # shrink it to nothing); max-width lets it scale down on narrow screens.
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" '
        f'aria-label="{html.escape(title)}" style="max-width:100%;height:auto">',
        f'<text x="{left}" y="16" {_TEXT} font-weight="bold">{html.escape(title)}</text>',
        f'<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="none" stroke="currentColor" stroke-opacity="0.4"/>',
    ]
    for t in xt:
        if x0 <= t <= x1:
            out.append(
                f'<line x1="{sx(t):.1f}" x2="{sx(t):.1f}" y1="{top}" y2="{top + ph}" stroke="currentColor" stroke-opacity="0.1"/>'
                f'<text x="{sx(t):.1f}" y="{top + ph + 16}" text-anchor="middle" {_TEXT}>{_fmt(t)}</text>'
            )
    for t in yt:
        if y0 <= t <= y1:
            out.append(
                f'<line x1="{left}" x2="{left + pw}" y1="{sy(t):.1f}" y2="{sy(t):.1f}" stroke="currentColor" stroke-opacity="0.1"/>'
                f'<text x="{left - 6}" y="{sy(t) + 4:.1f}" text-anchor="end" {_TEXT}>{_fmt(t)}</text>'
            )
    out.append(
        f'<text x="{left + pw / 2}" y="{height - 8}" text-anchor="middle" {_TEXT}>{html.escape(x_label)}</text>'
    )
    out.append(
        f'<text transform="translate(14 {top + ph / 2}) rotate(-90)" text-anchor="middle" {_TEXT}>{html.escape(y_label)}</text>'
    )
    for i, (name, points) in enumerate(series.items()):
        colour = PALETTE[i % len(PALETTE)]
        path = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in sorted(points))
        dash = ' stroke-dasharray="6 4"' if name in dashed else ""
        out.append(
            f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="2"{dash}/>'
        )
        out += [
            f'<circle cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="2.5" fill="{colour}"/>'
            for x, y in points
            if name not in dashed
        ]
        ly = top + 12 + 18 * i
        out.append(
            f'<line x1="{left + pw + 10}" x2="{left + pw + 30}" y1="{ly}" y2="{ly}" stroke="{colour}" stroke-width="2"{dash}/>'
            f'<text x="{left + pw + 36}" y="{ly + 4}" {_TEXT}>{html.escape(name)}</text>'
        )
    out.append("</svg>")
    return "\n".join(out)


def heatmap(
    matrix: Sequence[Sequence[float | None]],
    labels: Sequence[str],
    *,
    title: str,
    unit: str,
    cell: int = 44,
) -> str:
    """A square matrix as coloured cells with the value written in each (None = no value)."""
    n = len(labels)
    vals = [v for row in matrix for v in row if v is not None]
    lo, hi = (min(vals), max(vals)) if vals else (0.0, 1.0)
    left, top = 70, 40
    size = left + n * cell + 10
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{size}" height="{top + n * cell + 30}" '
        f'viewBox="0 0 {size} {top + n * cell + 30}" role="img" '
        f'aria-label="{html.escape(title)}" style="max-width:100%;height:auto">',
        f'<text x="4" y="16" {_TEXT} font-weight="bold">{html.escape(title)} ({html.escape(unit)})</text>',
    ]
    for i, name in enumerate(labels):
        out.append(
            f'<text x="{left - 6}" y="{top + i * cell + cell / 2 + 4}" text-anchor="end" {_TEXT}>{html.escape(name)}</text>'
            f'<text x="{left + i * cell + cell / 2}" y="{top - 6}" text-anchor="middle" {_TEXT}>{html.escape(name)}</text>'
        )
        for j in range(n):
            v = matrix[i][j]
            x, y = left + j * cell, top + i * cell
            if v is None:
                out.append(
                    f'<rect x="{x}" y="{y}" width="{cell}" height="{cell}" fill="currentColor" fill-opacity="0.05"/>'
                )
                continue
            t = (v - lo) / ((hi - lo) or 1)
            out.append(
                f'<rect x="{x}" y="{y}" width="{cell}" height="{cell}" fill="#1f77b4" fill-opacity="{0.15 + 0.8 * t:.2f}"/>'
                f'<text x="{x + cell / 2}" y="{y + cell / 2 + 4}" text-anchor="middle" {_TEXT}>{_fmt(v)}</text>'
            )
    out.append("</svg>")
    return "\n".join(out)
