"""The registry against the file tree: snippets and benchmarks are found by walking the
packages, never by a list; a leaf name is unique; nothing that sets BENCH is missed."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

from snippets.core.import_graph import module_path
from snippets.tools import registry


def make_tree(root: Path, files: list[str]) -> Path:
    for relative in files:
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("")
    return root


def test_two_modules_sharing_a_leaf_name_are_refused(tmp_path) -> None:
    tree = make_tree(
        tmp_path,
        ["__init__.py", "a/__init__.py", "a/ring.py", "b/__init__.py", "b/ring.py"],
    )
    with pytest.raises(RuntimeError, match="pkg.a.ring and pkg.b.ring share .*'ring'"):
        registry.walk(tree, "pkg")


def test_the_walk_finds_public_modules_in_packages_only(tmp_path) -> None:
    tree = make_tree(
        tmp_path,
        [
            "__init__.py",
            "__main__.py",
            "core/__init__.py",
            "core/runtime.py",
            "core/_private.py",
            "comm/__init__.py",
            "comm/allreduce.py",
            "scratch/notes.py",  # no __init__.py: not a package
        ],
    )
    assert registry.walk(tree, "pkg") == ("pkg.comm.allreduce", "pkg.core.runtime")


def test_the_real_tree_has_unique_leaves_and_no_cli() -> None:
    names = registry.module_names()
    leaves = [n.rsplit(".", 1)[1] for n in names]
    assert len(leaves) == len(set(leaves)) and "__main__" not in leaves
    assert "snippets.core.runtime" in names


def test_benchmarks_are_found_without_importing_them() -> None:
    found = registry.bench_modules()
    assert {"allreduce", "attention", "ddp"} <= set(found)
    for name, dotted in found.items():  # what reading the file said = the module
        module = importlib.import_module(dotted)
        assert module.BENCH == name and callable(module.main)
    every = [
        importlib.import_module(m) for m in registry.module_names()
    ]  # and none that sets BENCH is missed
    assert {
        m.BENCH for m in every if isinstance(getattr(m, "BENCH", None), str)
    } == set(found)


# attention's ``bench`` sweeps wider, in other dtypes and on every thread, while its
# snippet's run is the note's small sweep with the note's laws: two programs, kept
OWN_PROGRAM = {"attention"}


def test_no_benchmark_has_a_command_line_of_its_own() -> None:
    """One program behind both doors: ``bench NAME`` is ``bench_program`` over the
    module's ``add_arguments`` and ``main``, never a parser and launch of its own."""
    for name, dotted in registry.bench_modules().items():
        tree = ast.parse(module_path(dotted).read_text(encoding="utf-8"))
        defined = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
        own = defined & {"bench", "parser", "_parser", "_rank"}
        if name in OWN_PROGRAM:
            assert "bench" in own, f"{dotted} fits bench_program now: drop it here"
            continue
        assert not own, f"{dotted} defines {sorted(own)}: bench_program runs it"
        assert {"main", "add_arguments"} <= defined, dotted


def test_the_nearest_snippets_are_the_fewest_imports_away() -> None:
    block, helper, a, b, c, far = (Path(f"{n}.py") for n in "xhabcf")
    importers = {block: {helper, c}, helper: {a, b}, a: {far}}
    snippet_files = {a: "a", b: "b", c: "c", far: "far"}
    assert registry.nearest_snippets(block, importers, snippet_files) == ["c"]
    assert registry.nearest_snippets(helper, importers, snippet_files) == ["a", "b"]
    del snippet_files[c]  # then through the helper, one module further
    assert registry.nearest_snippets(block, importers, snippet_files) == ["a", "b"]
    assert registry.nearest_snippets(far, importers, snippet_files) == []
    loop = {block: {helper}, helper: {block}}  # a cycle ends, empty-handed
    assert registry.nearest_snippets(block, loop, {}) == []
