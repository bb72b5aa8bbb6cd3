"""The one table of kinds: every marker is its own (a page holding one kind's fragment
holds no other kind's marker by accident), every script and stylesheet of the site's
own is a file under ``docs/``, and the table needs nothing but the standard library
(the hooks load it by path, without ``snippets`` or torch)."""

from __future__ import annotations

import ast

from conftest import REPO

from snippets.render import kinds
from snippets.render.kinds import KINDS

DOCS = REPO / "docs"


def test_no_marker_is_found_inside_another() -> None:
    markers = {name: kind.marker for name, kind in KINDS.items()}
    assert len(set(markers.values())) == len(markers)
    inside = [
        (a, b)
        for a, m in markers.items()
        for b, n in markers.items()
        if a != b and m in n
    ]
    assert not inside, inside


def test_every_asset_of_the_sites_own_is_a_file_under_docs() -> None:
    own = {
        path
        for kind in KINDS.values()
        for path in kind.scripts + kind.styles
        if not path.startswith("assets/vendor/")  # npm packages, copied at build time
    }
    assert own  # the table names files of the site's own
    missing = sorted(p for p in own if not (DOCS / p).is_file())
    assert not missing, f"named in the table, not under docs/: {missing}"


def test_each_kind_loads_a_file_at_most_once_and_scripts_are_scripts() -> None:
    for name, kind in KINDS.items():
        assert len(set(kind.scripts)) == len(kind.scripts), name
        assert all(s.endswith(".js") for s in kind.scripts), name
        assert all(s.endswith(".css") for s in kind.styles), name


def test_the_table_imports_only_the_standard_library() -> None:
    tree = ast.parse(open(kinds.__file__, encoding="utf-8").read())
    named = {
        (node.module or "").split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
    } | {
        alias.name.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
    }
    assert named <= {"__future__", "typing"}, named
