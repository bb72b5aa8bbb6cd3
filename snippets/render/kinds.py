"""The one table: each kind of part, the ``cp-*`` marker its fragment starts with, and
the scripts and stylesheets (paths under the site's root, in load order) a page
holding that marker loads.

``snippets.render`` writes each fragment with its kind's marker;
``hooks/page_assets.py`` reads this file to give a page exactly the files of the
markers it holds. Standard library only: the hooks load it by path, without
importing ``snippets`` (or torch).
"""

from __future__ import annotations

from typing import NamedTuple


class Kind(NamedTuple):
    tag: str  # the fragment's outer element
    css: str  # its class, the cp-* name the scripts and styles select
    scripts: tuple[str, ...] = ()
    styles: tuple[str, ...] = ()

    @property
    def marker(self) -> str:
        """What the fragment starts with and a page holding it contains (attributes
        may follow the class: a prediction's answer, the calculator's id)."""
        return f'<{self.tag} class="{self.css}"'


DOM = "assets/javascripts/dom.js"  # the DOM builders the player and the viewer share
FORMULAS = "assets/sizing/formulas.js"  # the calculator's; the viewer's bytes too

KINDS: dict[str, Kind] = {
    "chart": Kind(
        "figure",
        "cp-chart",
        # vega-lite and vega-embed read the globals the scripts before them set
        scripts=(
            "assets/vendor/vega/vega.min.js",
            "assets/vendor/vega/vega-lite.min.js",
            "assets/vendor/vega/vega-embed.min.js",
            "assets/javascripts/charts.js",
        ),
    ),
    "viewer": Kind(
        "figure",
        "cp-viewer",
        scripts=(
            "assets/vendor/dagre/dagre.min.js",
            DOM,
            FORMULAS,
            "assets/viewer/overlay.js",
            "assets/viewer/viewer.js",
        ),
        styles=("assets/viewer/viewer.css",),
    ),
    "sizing": Kind(
        "figure",
        "cp-sizing",
        scripts=(
            FORMULAS,
            "assets/sizing/estimate.js",
            "assets/sizing/cli.js",
            "assets/sizing/render.js",
            "assets/sizing/widget.js",
        ),
        styles=("assets/sizing/sizing.css",),
    ),
    "player": Kind(
        "figure",
        "cp-player",
        scripts=(DOM, "assets/player/player.js"),
        styles=("assets/player/player.css",),
    ),
    "predict": Kind(
        "form",
        "cp-predict",
        scripts=("assets/predict/predict.js",),
        styles=("assets/predict/predict.css",),
    ),
    # the run's provenance under every result: styled by the site's own stylesheet
    "provenance": Kind("p", "cp-provenance"),
}
