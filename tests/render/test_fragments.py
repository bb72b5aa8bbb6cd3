"""The renderer turns each kind of part into the fragment its script reads: it starts
with the marker the table gives (the marker the hooks load the kind's assets for), is
one HTML block, and carries the part's data inline as JSON that reads back equal."""

from __future__ import annotations

import json
import re

import pytest
from conftest import load_hook

from snippets.core import parts
from snippets.render import render
from snippets.render.fragments import FRAGMENTS, read_back
from snippets.render.kinds import KINDS

TRICKY = "a </script> & <b>"  # would end the script early, or open a tag
MODULE = {"id": "", "name": "M", "type": "M", "parent": None, "params": 3}
GRAPH = {
    "model": TRICKY,
    "source": "torch.fx",
    "modules": [MODULE | {"bytes": 12, "flops": 0, "tensors": []}],
    "ops": [],
}
EXAMPLES = {  # a part of each kind, and the role of the script that carries it
    "player": (parts.player({"title": TRICKY, "frames": [], "n": [1, 2.5]}), "trace"),
    "viewer": (parts.viewer(GRAPH, {"tp": 2, "pp": 2}), "graph"),
    "sizing": (parts.sizing({"help": TRICKY, "n": [1, 2.5, None, True]}), "data"),
    "predict": (parts.prediction("q", TRICKY, "bytes", 1536.0, TRICKY, "x.py"), None),
}


def test_every_kind_a_snippet_returns_has_a_row_and_a_renderer() -> None:
    kinds = set(parts.Kind.__args__)
    assert kinds == set(EXAMPLES)
    assert kinds <= set(KINDS) and set(KINDS) <= set(FRAGMENTS)


@pytest.mark.parametrize("kind", sorted(EXAMPLES))
def test_the_fragment_starts_with_the_tables_marker_and_is_one_block(kind) -> None:
    part, _ = EXAMPLES[kind]
    page = render(json.loads(json.dumps(part)))  # as results/<name>.json holds it
    assert page.startswith(KINDS[kind].marker) and "\n\n" not in page
    others = [k.marker for name, k in KINDS.items() if name != kind]
    assert not any(m in page for m in others)
    outside = re.sub(r"<script[^>]*>.*?</script>", "", page, flags=re.S)
    assert "<b>" not in outside and TRICKY not in page  # escaped, or inside JSON


@pytest.mark.parametrize("kind", ["player", "viewer", "sizing"])
def test_the_data_reads_back_as_json(kind) -> None:
    part, role = EXAMPLES[kind]
    page = render(part)
    assert page.count("</script>") == page.count("<script")
    sent = part["data"]["graph"] if kind == "viewer" else part["data"]
    assert read_back(page, kind, role) == json.loads(json.dumps(sent))
    if kind == "viewer":
        assert read_back(page, kind, "start") == {"tp": 2, "pp": 2}


def test_a_prediction_carries_its_answer_for_the_script() -> None:
    page = render(EXAMPLES["predict"][0])
    assert 'data-answer="1536.0"' in page and "1,536 bytes" in page
    assert "a &lt;/script&gt; &amp; &lt;b&gt;" in page


def test_the_hooks_load_each_kinds_assets_for_its_fragment() -> None:
    table = load_hook("page_assets")
    for kind, (part, _) in EXAMPLES.items():
        loads = table.needs(render(part))
        assert loads.scripts == KINDS[kind].scripts, kind
        assert loads.styles == KINDS[kind].styles, kind


def test_an_unknown_kind_is_refused() -> None:
    for bad in ({"kind": "nope", "data": 1}, {"data": 1}, "<div>"):
        with pytest.raises(ValueError, match="no renderer"):
            render(bad)
