"""The standalone page folder and the note's block: complete, loadable, escaped."""

from __future__ import annotations

import json
import re
from pathlib import Path

from snippets.core import parts
from snippets.render import render
from snippets.render.kinds import KINDS
from snippets.render.viewer_page import site_assets, write_page


def small_graph(name: str = "M") -> dict:
    module = {"id": "", "name": name, "type": name, "parent": None, "params": 3}
    module |= {"bytes": 12, "flops": 0, "tensors": []}
    return {"model": name, "source": "torch.fx", "modules": [module], "ops": []}


def test_page_folder_holds_everything_it_loads(tmp_path) -> None:
    index = write_page(small_graph(), tmp_path / "out")
    page = index.read_text(encoding="utf-8")
    srcs = re.findall(r'<script src="([^"]+)"></script>', page)
    hrefs = re.findall(r'<link rel="stylesheet" href="([^"]+)">', page)
    scripts, styles = site_assets()  # what a site page with a viewer loads
    vendor = [Path(s).name for s in scripts if s.startswith("assets/vendor/")]
    assert srcs == ["graph.js", *vendor, "viewer.js"]  # the site's modules in one
    assert hrefs == [Path(s).name for s in styles] and "viewer.css" in hrefs
    for name in srcs + hrefs:
        assert (index.parent / name).is_file(), name
    data = (index.parent / "graph.js").read_text(encoding="utf-8")
    prefix = "window.MODEL_GRAPH = "
    assert data.startswith(prefix)
    assert json.loads(data[len(prefix) :].rstrip().rstrip(";")) == small_graph()
    assert "http" not in page  # nothing from another host


def test_note_block_is_one_html_block_and_cannot_end_its_script_early() -> None:
    graph = small_graph("</script><b>")
    block = render(parts.viewer(graph))
    assert block.startswith(KINDS["viewer"].marker + ">") and "\n\n" not in block
    inline = block.split('class="cp-viewer__graph">', 1)[1].split("</script>", 1)[0]
    assert json.loads(inline.replace("<\\/", "</")) == graph
    assert "cp-viewer__start" not in block
    started = render(parts.viewer(graph, {"tp": 2, "pp": 2}))
    first = started.split('class="cp-viewer__start">', 1)[1].split("</script>", 1)[0]
    assert json.loads(first) == {"tp": 2, "pp": 2} and "\n\n" not in started
