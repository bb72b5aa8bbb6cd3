"""The viewer's standalone page: a folder that works from file://.

``write_page(graph, out_dir, start)`` writes ``graph.js`` (``window.MODEL_GRAPH =
{...};``: a script, not JSON, since a page opened from file:// may not ``fetch``; and
the degrees the overlay opens with, ``window.MODEL_VIEW_START``), the scripts and
styles a site page with a viewer loads (``snippets/render/kinds.py`` lists them: the
viewer's own from ``docs/assets/``, the sizing calculator's formulas for the overlay's
bytes, dagre's browser build from ``node_modules``, which ``npm ci`` installs) and an
``index.html`` that loads them by relative path: the folder can be moved, mailed or
opened offline. The site's own scripts are ES modules, which a page opened from
file:// may not load, so the folder holds them as one classic script, ``viewer.js``
(:func:`classic_script`): each module's body in a function that returns its exports.

A note's viewer is a part of kind ``viewer`` (``snippets.core.parts.viewer``), which
``snippets.render.fragments.viewer`` writes with the same caption, :func:`summary`.
"""

from __future__ import annotations

import html
import json
import posixpath
import re
import shutil
from pathlib import Path

from snippets.core.errors import UsageError
from snippets.core.import_graph import REPO_DIR
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


IMPORT = re.compile(r'^import (?:\{([^}]*)\}|\* as (\w+)) from "([^"]+)";$', re.M)
EXPORT = re.compile(r"^export \{([^}]*)\};$", re.M)


def classic_script(site_paths: list[str]) -> str:
    """The site's modules ``site_paths`` (in an order where each follows the ones it
    imports) as one classic script. A module imports with ``import {a, b as c} from
    "./x.js"`` or ``import * as X from``, and exports with one ``export {...};``."""
    names = {path: f"module{i}" for i, path in enumerate(site_paths)}
    parts = ['(() => {\n"use strict";']
    for path in site_paths:
        text = (DOCS / path).read_text(encoding="utf-8")

        def bind(m: re.Match) -> str:
            where = posixpath.normpath(posixpath.join(posixpath.dirname(path), m[3]))
            if where not in names or names[where] >= names[path]:
                raise ValueError(f"{path} imports {m[3]}, not loaded before it")
            if m[2]:
                return f"const {m[2]} = {names[where]};"
            pairs = (n.split(" as ") for n in m[1].replace("\n", " ").split(","))
            fields = ", ".join(
                ": ".join(p.strip() for p in pair) for pair in pairs if pair[0].strip()
            )
            return f"const {{ {fields} }} = {names[where]};"

        exports = EXPORT.findall(text)
        body = EXPORT.sub("", IMPORT.sub(bind, text))
        if len(exports) > 1 or re.search(r"^export ", body, re.M):
            raise ValueError(f"{path}: export one list, export {{...}};")
        pairs = (n.split(" as ") for n in (exports[0] if exports else "").split(","))
        fields = ", ".join(
            f"{p[-1].strip()}: {p[0].strip()}" for p in pairs if p[0].strip()
        )
        parts.append(
            f"const {names[path]} = (() => {{\n{body}\nreturn {{ {fields} }};\n}})();"
        )
    return "\n".join([*parts, "})();"]) + "\n"


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
        own = [s for s in scripts if not s.startswith("assets/vendor/")]
        vendor = [s for s in scripts if s.startswith("assets/vendor/")]
        for site_path in vendor + list(styles):  # into one flat folder
            shutil.copy2(source(site_path), out_dir / Path(site_path).name)
        (out_dir / "viewer.js").write_text(classic_script(own), encoding="utf-8")
        page = PAGE.format(
            title=html.escape(f"{graph['model']}: model viewer"),
            figure=VIEWER.marker,
            summary=html.escape(summary(graph)),
            styles="\n".join(
                f'<link rel="stylesheet" href="{Path(s).name}">' for s in styles
            ),
            scripts="\n".join(
                f'<script src="{Path(s).name}"></script>'
                for s in [*vendor, "viewer.js"]
            ),
        )
        index = out_dir / "index.html"
        index.write_text(page, encoding="utf-8")
    except OSError as exc:
        raise UsageError(
            f"cannot write the page into {out_dir}: {exc.strerror}"
        ) from None
    return index
