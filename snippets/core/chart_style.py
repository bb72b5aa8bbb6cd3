"""How the charts look: series colours, dashes, fonts and the two colour schemes.

``snippets.core.charts`` writes ``LIGHT`` into every spec's config and ``DARK`` into
its ``usermeta``; the page merges ``DARK`` over the config when Material's scheme is
slate. Series colours are the same in both schemes, so a line keeps its colour when the
reader switches.
"""

from __future__ import annotations

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

LIGHT = {  # the spec's own config: text and rules for a light page
    "background": "transparent",  # the page shows through
    "font": FONT,
    "padding": 4,
    "view": {"stroke": None},
    "title": {"fontSize": 14, "anchor": "start", "color": "#222222", "offset": 8},
    "axis": {
        "labelFontSize": 11,
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
