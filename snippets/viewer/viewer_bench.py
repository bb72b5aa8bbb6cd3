"""``python -m snippets bench viewer``: the viewer's speed on a big graph, in Chromium.

    python -m snippets bench viewer [--layers 42] [--repeats 5] [--json]

Exports the shared GPT with ``--layers`` blocks (the tiny GPT's widths otherwise;
42 blocks draw about 1,500 boxes fully expanded), writes the standalone page
(``snippets.render.viewer_page.write_page``) into a temporary folder and opens it
from file:// in headless Chromium (Debian's ``chromium``, or ``$CHROMIUM``). It
measures, median over ``--repeats`` with the range:

* ``first_render_ms``: navigation start to the viewer's first picture (collapsed to
  the top-level modules): the page, its scripts, the graph's data, layout, DOM;
* ``expand_ms`` and ``collapse_ms``: toggling the middle block of the fully expanded
  graph (it is expanded again, untimed, before each collapse): the script, the
  re-layout of that block and its ancestors, the redrawn DOM and the style and
  layout the browser then does (forced by reading the drawing's box); no paint;
* ``expand_all_ms``: collapsed to fully expanded, every group laid out afresh.

Each comes with ``*_layout_ms``, the part spent in dagre's layout, and ``script_ms``,
the viewer's own render (layout included); the rest is the browser's (style and
layout of the drawing; for the first render also loading the page). ``nodes`` is
what the fully expanded page draws: every operation, input and the output, and
every module (but the root) that runs one; the page's own count of boxes must
agree. Targets: first render ≤ 1 s, expand or collapse ≤ 100 ms; a miss is said,
with where the time went.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
from pathlib import Path

import torch

from snippets.core.claims import LawBroken
from snippets.core.cli import positive_int
from snippets.core.errors import UsageError
from snippets.models.tiny_gpt import GPT, GPTConfig
from snippets.render.viewer_page import NODE, VIEWER, write_page
from snippets.viewer.graph_export import ancestors, export_graph
from snippets.viewer.parallel_overlay import annotate

BENCH = "viewer"
TARGETS = {"first_render_ms": 1000.0, "expand_ms": 100.0, "collapse_ms": 100.0}
FIGURE = f"{VIEWER.tag}.{VIEWER.css}"  # the viewer's figure, as CSS selects it
FLAGS = ["--no-sandbox", "--disable-gpu", "--no-first-run"]
FLAGS += ["--disable-background-networking", "--disable-component-update"]
TIMED = """([what, id, figure]) => {
  const v = document.querySelector(figure).viewer;
  const t0 = performance.now();
  if (what === "toggle") v.toggle(id); else v.expandAll();
  v.svg.getBBox();  // the browser's style and layout, done now
  const d = v.root.dataset;
  return [performance.now() - t0, Number(d.layoutMs), Number(d.renderMs)];
}"""


def chromium() -> str:
    for name in (os.environ.get("CHROMIUM"), "chromium", "chromium-browser"):
        if name and shutil.which(name):
            return shutil.which(name)
    raise UsageError("no Chromium here: install Debian's chromium or set $CHROMIUM")


def node_count(graph: dict) -> int:
    """Boxes of the fully expanded page: ops, inputs, the output, used modules."""
    used = {a for op in graph["ops"] for a in ancestors(op["module"])} - {""}
    return len(graph["ops"]) + len(graph["inputs"]) + 1 + len(used)


def gpt_graph(layers: int) -> dict:
    cfg = GPTConfig(n_layer=layers)
    idx = torch.zeros(1, cfg.block_size, dtype=torch.long)
    return annotate(export_graph(GPT(cfg), (idx,)))


def summary(times: list[tuple[float, float, float]]) -> dict:
    ms, layout, script = zip(*times)
    return {
        "ms": statistics.median(ms),
        "range": [min(ms), max(ms)],
        "layout_ms": statistics.median(layout),
        "script_ms": statistics.median(script),
    }


def measure(graph: dict, repeats: int = 5) -> dict:
    """The figures the docstring lists, for ``graph`` (annotated)."""
    from playwright.sync_api import sync_playwright

    middle = graph["stack"][len(graph["stack"]) // 2]
    found: dict[str, list] = {k: [] for k in ("first", "expand", "collapse", "all")}
    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as pw:
        url = write_page(graph, Path(tmp)).resolve().as_uri()
        browser = pw.chromium.launch(executable_path=chromium(), args=FLAGS)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        for _ in range(repeats):
            page.goto(url)
            fig = page.wait_for_selector(f"{FIGURE}--ready[data-ready-ms]")
            at = fig.evaluate(
                "f => [+f.dataset.readyMs, +f.dataset.layoutMs, +f.dataset.renderMs]"
            )
            found["first"].append(tuple(at))
        for _ in range(repeats):
            found["all"].append(tuple(page.evaluate(TIMED, ["all", "", FIGURE])))
            drawn = page.locator(NODE).count()
            found["collapse"].append(
                tuple(page.evaluate(TIMED, ["toggle", middle, FIGURE]))
            )
            found["expand"].append(
                tuple(page.evaluate(TIMED, ["toggle", middle, FIGURE]))
            )
        version = browser.version
        browser.close()
    if errors:
        raise RuntimeError(f"the page failed: {errors[0]}")
    nodes = node_count(graph)
    if drawn != nodes:
        raise LawBroken(f"the page drew {drawn} boxes, the graph has {nodes}")
    s = {k: summary(v) for k, v in found.items()}
    return {
        "nodes": nodes,
        "ops": len(graph["ops"]),
        "layers": len(graph["stack"]),
        "first_render_ms": s["first"]["ms"],
        "expand_ms": s["expand"]["ms"],
        "collapse_ms": s["collapse"]["ms"],
        "expand_all_ms": s["all"]["ms"],
        "first_render_layout_ms": s["first"]["layout_ms"],
        "expand_layout_ms": s["expand"]["layout_ms"],
        "collapse_layout_ms": s["collapse"]["layout_ms"],
        "expand_all_layout_ms": s["all"]["layout_ms"],
        "script_ms": {k: v["script_ms"] for k, v in s.items()},
        "ranges_ms": {k: v["range"] for k, v in s.items()},
        "repeats": repeats,
        "browser": f"Chromium {version}, headless",
    }


def report(r: dict) -> list[str]:
    lines = [
        f"viewer: GPT of {r['layers']} blocks, {r['nodes']:,} boxes fully expanded "
        f"({r['ops']:,} ops)",
        f"{r['browser']}; median of {r['repeats']} (range), ms: dagre's layout,",
        "  the rest of the viewer's script, the browser's (style, layout, loading)",
    ]
    names = {"first": "first_render", "expand": "expand", "collapse": "collapse"}
    for short, key in (names | {"all": "expand_all"}).items():
        ms, lay, (lo, hi) = r[f"{key}_ms"], r[f"{key}_layout_ms"], r["ranges_ms"][short]
        target = TARGETS.get(f"{key}_ms")
        verdict = "" if target is None else (
            f"  ≤ {target:.0f}: " + ("met" if ms <= target else "MISSED")
        )  # fmt: skip
        script = r["script_ms"][short] - lay
        lines.append(
            f"  {key:<13}{ms:7.1f} ({lo:.0f}-{hi:.0f})  dagre {lay:.1f}, script "
            f"{script:.1f}, browser {ms - lay - script:.1f}{verdict}"
        )
    return lines


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--layers", type=positive_int, default=42, help="GPT blocks")
    parser.add_argument("--repeats", type=positive_int, default=5, help="runs a figure")
    parser.add_argument(
        "--json", dest="as_json", action="store_true", help="one JSON object"
    )


def main(layers: int = 42, repeats: int = 5, as_json: bool = False) -> dict:
    """No SPEC, so no snippet (run-all has no browser): ``bench viewer`` runs it."""
    r = measure(gpt_graph(layers), repeats)
    print(json.dumps(r) if as_json else "\n".join(report(r)))
    return r
