"""The viewer's standalone page: a folder that works from file://.

``write_page(graph, out_dir, start)`` writes ``graph.js`` (``window.MODEL_GRAPH =
{...};``: a script, not JSON, since a page opened from file:// may not ``fetch``; and
the degrees the overlay opens with, ``window.MODEL_VIEW_START``), the scripts and
styles a site page with a viewer loads (``snippets/render/kinds.py`` lists them: the
viewer's own from ``docs/assets/``, the sizing calculator's formulas for the overlay's
bytes, dagre's browser build from ``node_modules``, which ``npm ci`` installs) and an
``index.html`` that loads them by relative path: the folder can be moved, mailed or
opened offline.

A note's viewer is a part of kind ``viewer`` (``snippets.core.parts.viewer``), which
``snippets.render.fragments.viewer`` writes with the same caption, :func:`summary`.
"""

from __future__ import annotations

import html
import json
import shutil
from pathlib import Path

from snippets.core.errors import UsageError
from snippets.core.registry import REPO_DIR
from snippets.render.kinds import KINDS

DOCS = REPO_DIR / "docs"
DAGRE = REPO_DIR / "node_modules" / "@dagrejs" / "dagre" / "dist" / "dagre.min.js"
VIEWER = KINDS["viewer"]
NODE = ".cp-node"  # a box the viewer draws (docs/assets/viewer/viewer.js)

PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
{styles}
<style>body {{ font-family: system-ui, sans-serif; margin: 1rem 2rem; }}</style>
</head>
<body class="cp-viewer-page">
<h1>{title}</h1>
<p>{summary}</p>
{figure}></figure>
<script src="graph.js"></script>
{scripts}
</body>
</html>
"""


def inline_json(graph: dict) -> str:
    """JSON that is safe inside a <script>: ``</`` would end the element early."""
    return json.dumps(graph, separators=(",", ":")).replace("</", "<\\/")


def summary(graph: dict) -> str:
    root, ops = graph["modules"][0], len(graph["ops"])
    nodes, source = f"{ops} ops", graph["source"]
    if graph.get("level") == "module":  # no tracer captured it: module calls
        nodes, source = f"{ops} module calls", f"module level, {source}"
    return (
        f"{graph['model']}: {nodes} in {len(graph['modules'])} modules, "
        f"{root['params']:,} params, {root['flops']:,} forward FLOPs ({source})"
    )


def site_assets() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(scripts in load order, stylesheets) of a site page holding a viewer, paths
    under the site's root, as the table gives them."""
    return VIEWER.scripts, VIEWER.styles


def source(site_path: str) -> Path:
    """Where a file of the built site comes from: the vendored ones from
    ``node_modules``, the site's own from ``docs/``."""
    if site_path.startswith("assets/vendor/"):
        if site_path.endswith("/dagre.min.js"):
            return DAGRE
        raise UsageError(f"the viewer page cannot copy {site_path}")
    return DOCS / site_path


def write_page(graph: dict, out_dir: Path, start: dict | None = None) -> Path:
    """Write the standalone viewer into ``out_dir``; return its ``index.html``."""
    if not DAGRE.is_file():
        raise UsageError(
            f"{DAGRE.relative_to(REPO_DIR)} is missing: run 'npm ci' first"
        )
    scripts, styles = site_assets()
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        first = f"window.MODEL_VIEW_START = {inline_json(start)};\n" if start else ""
        (out_dir / "graph.js").write_text(
            f"window.MODEL_GRAPH = {inline_json(graph)};\n{first}", encoding="utf-8"
        )
        for site_path in scripts + styles:  # into one flat folder
            shutil.copy2(source(site_path), out_dir / Path(site_path).name)
        page = PAGE.format(
            title=html.escape(f"{graph['model']}: model viewer"),
            figure=VIEWER.marker,
            summary=html.escape(summary(graph)),
            styles="\n".join(
                f'<link rel="stylesheet" href="{Path(s).name}">' for s in styles
            ),
            scripts="\n".join(
                f'<script src="{Path(s).name}"></script>' for s in scripts
            ),
        )
        index = out_dir / "index.html"
        index.write_text(page, encoding="utf-8")
    except OSError as exc:
        raise UsageError(
            f"cannot write the page into {out_dir}: {exc.strerror}"
        ) from None
    return index
