"""Only ``snippets/render`` writes HTML: no other module under ``snippets/`` holds a
tag in a string (``"<div"``, ``"<figure"``), calls ``html.escape`` or spells a
``cp-*`` marker. Docstrings may name them; code may not."""

from __future__ import annotations

import ast
import re
from pathlib import Path

SNIPPETS = Path(__file__).resolve().parents[2] / "snippets"
ELEMENTS = (
    "a abbr b body br button circle code details div em figcaption figure form g h1 h2 "
    "h3 h4 head html i img input label li link meta nav noscript ol p path polygon pre "
    "rect script section small span strong style summary svg table tbody td th thead "
    "tr ul"
).split()
TAG = re.compile(rf"</?(?:{'|'.join(ELEMENTS)})(?:[\s>/]|$)")
MARKER = re.compile(r"(?<![\w-])cp-[a-z]")


def docstrings(tree: ast.AST) -> set[int]:
    """ids of the string constants that are docstrings."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(
            node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
        ):
            body = node.body
            if body and isinstance(body[0], ast.Expr):
                if isinstance(body[0].value, ast.Constant):
                    found.add(id(body[0].value))
    return found


def html_in(source: str) -> list[str]:
    """What in ``source`` builds HTML: a tag or marker in a string, html.escape."""
    tree = ast.parse(source)
    skip = docstrings(tree)
    said = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if id(node) in skip:
                continue
            text = node.value
            for pattern in (TAG, MARKER):
                if pattern.search(text):
                    said.append(f"line {node.lineno}: {text[:40]!r}")
        elif isinstance(node, ast.Attribute) and node.attr == "escape":
            if isinstance(node.value, ast.Name) and node.value.id == "html":
                said.append(f"line {node.lineno}: html.escape")
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in node.names]
            if "html" in names or getattr(node, "module", None) == "html":
                said.append(f"line {node.lineno}: imports html")
    return said


def test_no_module_outside_render_builds_html() -> None:
    found = {}
    for path in sorted(SNIPPETS.rglob("*.py")):
        if path.is_relative_to(SNIPPETS / "render"):
            continue
        said = html_in(path.read_text(encoding="utf-8"))
        if said:
            found[str(path.relative_to(SNIPPETS))] = said
    assert not found, found


def test_the_check_sees_each_way_of_writing_html() -> None:
    """The rule would catch what it forbids (and not a docstring, nor cp-1 or tp-cp)."""
    assert html_in('x = "<div class=a>"')
    assert html_in("x = f'<figure>{y}'")
    assert html_in('x = "figure.cp-viewer"')
    assert html_in("import html\nx = html.escape(y)")
    assert html_in("from html import escape")
    assert not html_in('"""A <figure class="cp-player"> docstring."""\nx = "a < b"')
    assert not html_in('x = "s/cp-1 hops, tp-cp-ep order, 1 <2"')
