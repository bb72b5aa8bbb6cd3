"""Serve the site's third-party JavaScript and fonts ourselves.

KaTeX's stylesheet and fonts, Vega (vega, vega-lite, vega-embed) and dagre come from
npm packages installed at build time (``npm ci``, pinned by package-lock.json,
git-ignored); this hook copies the files the pages load into the built site, so no
page ever asks a CDN or a font host for anything. ``hooks/page_assets.py`` says which
pages load which of them.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from mkdocs.exceptions import PluginError

# (source under node_modules, destination under the site's assets/vendor)
FILES = [
    ("katex/dist/katex.min.css", "katex/katex.min.css"),
    ("katex/dist/fonts", "katex/fonts"),
    ("vega/build/vega.min.js", "vega/vega.min.js"),
    ("vega-lite/build/vega-lite.min.js", "vega/vega-lite.min.js"),
    ("vega-embed/build/vega-embed.min.js", "vega/vega-embed.min.js"),
    ("@dagrejs/dagre/dist/dagre.min.js", "dagre/dagre.min.js"),  # the model viewer
]


def _node_modules(config) -> Path:
    return Path(config.config_file_path).resolve().parent / "node_modules"


def on_config(config):
    missing = [src for src, _ in FILES if not (_node_modules(config) / src).exists()]
    if missing:
        raise PluginError(
            f"site assets missing ({missing[0]}): run 'npm ci' first"
            " (make site does it)"
        )
    return config


def on_post_build(config):
    vendor = Path(config.site_dir) / "assets" / "vendor"
    for src, dest in FILES:
        source, target = _node_modules(config) / src, vendor / dest
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            shutil.copytree(source, target, dirs_exist_ok=True)
        else:
            shutil.copy2(source, target)
