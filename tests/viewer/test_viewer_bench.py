"""``python -m snippets bench viewer`` on a small graph: its JSON, its node count
against the exported graph's (and the page's own count), and bad input."""

from __future__ import annotations

import json

import pytest
from conftest import refused

from snippets.__main__ import main
from snippets.core.errors import UsageError
from snippets.viewer import viewer_bench

FIELDS = ("nodes", "first_render_ms", "expand_ms", "collapse_ms")


def test_json_fields_and_node_count(tiny, monkeypatch, capsys) -> None:
    try:
        viewer_bench.chromium()
    except UsageError:
        pytest.skip("no Chromium here (CI installs Debian's chromium package)")
    _, _, graph = tiny  # the 2-block tiny GPT, exported once for the session
    monkeypatch.setattr(viewer_bench, "gpt_graph", lambda layers: graph)
    assert main(["bench", "viewer", "--layers", "2", "--repeats", "1", "--json"]) == 0
    found = json.loads(capsys.readouterr().out)
    for key in FIELDS:
        assert isinstance(found[key], (int, float)) and found[key] >= 0, key
    modules = {m["id"] for m in graph["modules"] if m["id"]}
    used = {
        m for m in modules if any(op["module"].startswith(m) for op in graph["ops"])
    }  # every module but the root that runs an operation, itself or below
    assert found["nodes"] == len(graph["ops"]) + len(graph["inputs"]) + 1 + len(used)
    assert found["expand_layout_ms"] <= found["expand_ms"]
    assert found["layers"] == len(graph["stack"])


@pytest.mark.parametrize("argv", [["--layers", "0"], ["--repeats", "x"]])
def test_bad_input_is_one_line_and_exit_2(argv, capfd) -> None:
    refused(["bench", "viewer", *argv], capfd)
