"""The import graph against Python's own import system: the files a snippet's hash
covers are the files Python really runs when it imports the snippet, so a change to a
building block reruns exactly the snippets built on it; the fork server's preload
follows what an optimizer step imports; no module imports itself through others."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO

from snippets.core import import_graph, results
from snippets.tools import registry, run_all

# Oracle: a fresh interpreter imports torch (and the torch packages most snippets pull
# in, which list no snippets file) once, then forks a child per module; each child
# imports that one module and lists the snippets files now in sys.modules.
ORACLE = """
import importlib, json, os, sys
import torch, torch.distributed, torch._dynamo
found = {}
for name in sys.argv[1:]:
    r, w = os.pipe()
    if os.fork() == 0:
        os.close(r)
        importlib.import_module(name)
        files = [m.__file__ for k, m in list(sys.modules.items())
                 if k.split(".")[0] == "snippets" and getattr(m, "__file__", None)]
        os.write(w, json.dumps(files).encode())
        os._exit(0)
    os.close(w)
    with os.fdopen(r, "rb") as pipe:
        found[name] = json.loads(pipe.read())
    os.wait()
print(json.dumps(found))
"""


@pytest.fixture(scope="module")
def real_imports() -> dict[str, set[Path]]:
    """For every registered snippet, the snippets files Python runs to import it."""
    entries = registry.snippets_by_name()
    proc = subprocess.run(
        [sys.executable, "-c", ORACLE, *(e.module.__name__ for e in entries.values())],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    found = json.loads(proc.stdout)
    return {
        name: {Path(f).resolve() for f in found[e.module.__name__]}
        for name, e in entries.items()
    }


@pytest.fixture(scope="module")
def closures() -> dict[Path, set[Path]]:
    """Every snippet's import closure by its path, read once (each is seconds of
    parsing): the edits below append a comment to the bytes the hash reads, which
    changes no import, so no closure changes under them."""
    entries = registry.snippets_by_name().values()
    return {e.path: import_graph.import_closure(e.path) for e in entries}


@pytest.fixture(scope="module")
def hashes_before(closures) -> dict[str, str]:
    """Every snippet's code hash with no file changed, for each dependency's test."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(results, "import_closure", closures.__getitem__)
        entries = registry.snippets_by_name()
        return {n: results.code_hash(e.path, "gloo") for n, e in entries.items()}


def shown(paths: set[Path]) -> list[str]:
    return sorted(str(p.relative_to(REPO)) for p in paths)


def test_the_import_closure_holds_every_file_python_imports(
    real_imports, closures
) -> None:
    assert len(real_imports) > 10
    for name, real in real_imports.items():
        closure = closures[registry.snippets_by_name()[name].path]
        assert REPO / "snippets" / "__init__.py" in real
        assert real <= closure, f"{name}: the hash misses {shown(real - closure)}"


DEPENDENCIES = [
    "snippets/comm/plumbing.py",  # point-to-point plumbing: every hand-made collective
    "snippets/attention/online_softmax.py",  # ring attention's merge
    "snippets/core/runtime.py",  # everything
]


@pytest.fixture
def changed_file(monkeypatch):
    """Make one file's bytes (as the hash reads them) differ from what is on disk."""
    read_bytes = Path.read_bytes

    def change(relative: str) -> Path:
        target = (REPO / relative).resolve()
        assert target.is_file(), f"{relative} is gone: update DEPENDENCIES"

        def patched(self: Path) -> bytes:
            edit = b"\n# an edit\n" if self.resolve() == target else b""
            return read_bytes(self) + edit

        monkeypatch.setattr(Path, "read_bytes", patched)
        return target

    return change


@pytest.mark.parametrize("dependency", DEPENDENCIES)
def test_a_change_to_a_dependency_changes_exactly_its_dependents_hashes(
    dependency: str, real_imports, closures, hashes_before, changed_file, monkeypatch
) -> None:
    entries = registry.snippets_by_name()
    monkeypatch.setattr(results, "import_closure", closures.__getitem__)
    target = changed_file(dependency)
    after = {n: results.code_hash(e.path, "gloo") for n, e in entries.items()}
    changed = {n for n in entries if hashes_before[n] != after[n]}
    built_on_it = {n for n, real in real_imports.items() if target in real}
    assert built_on_it, f"no snippet imports {dependency}"
    assert changed == built_on_it, (
        f"stale: {sorted(built_on_it - changed)}; rerun for nothing: "
        f"{sorted(changed - built_on_it)}"
    )


def test_run_all_reruns_a_snippet_when_its_dependency_changes(
    tmp_path, monkeypatch, changed_file
) -> None:
    entry = registry.snippet("ring_allreduce")
    ran: list[str] = []

    def fake_run_one(e, results_dir, backend, timeout_s, together=1):
        ran.append(e.name)
        return True, "0.0 s"

    monkeypatch.setattr(run_all, "run_one", fake_run_one)
    record = {"hash": results.code_hash(entry.path, "gloo")}
    (tmp_path / "ring_allreduce.json").write_text(json.dumps(record))
    opts = argparse.Namespace(
        results=str(tmp_path),
        backend="gloo",
        only=["ring_allreduce"],
        force=False,
        per_snippet_timeout=60.0,
        jobs=2,
    )
    assert run_all.run_all(opts) == 0 and ran == []  # unchanged: cached
    changed_file("snippets/comm/plumbing.py")
    assert run_all.run_all(opts) == 0 and ran == ["ring_allreduce"]


def test_an_optimizer_step_is_what_imports_dynamo_and_the_guess_follows_imports():
    """The fork server preloads torch._dynamo only for snippets that step an optimizer,
    because a step is what imports it (checked in a fresh interpreter), and the guess
    reads the import closure: expert_parallel names no optimizer, the moe it imports
    does."""
    probe = (
        "import sys, torch\n"
        "p = torch.nn.Parameter(torch.ones(1)); p.grad = torch.ones(1)\n"
        "before = 'torch._dynamo' in sys.modules\n"
        "torch.optim.SGD([p], lr=0.1).step()\n"
        "print(before, 'torch._dynamo' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    )
    assert out.stdout.split() == ["False", "True"]
    path = registry.snippet("expert_parallel").path
    assert not import_graph._OPTIMIZER.search(path.read_text(encoding="utf-8"))
    assert import_graph.steps_optimizer(path)
    assert import_graph.steps_optimizer(registry.snippet("zero").path)
    assert not import_graph.steps_optimizer(registry.snippet("collectives").path)


def test_the_cycle_finder_finds_a_planted_cycle() -> None:
    a, b, c = Path("a.py"), Path("b.py"), Path("c.py")
    assert import_graph.import_cycles({a: {b}, b: {c}, c: set()}) == []
    assert import_graph.import_cycles({a: {b}, b: {c}, c: {a}}) == [[a, b, c, a]]


def test_no_module_in_snippets_imports_itself_through_others() -> None:
    files = [import_graph.module_path(n).resolve() for n in registry.module_names()]
    graph = {f: import_graph.local_imports(f) - {f} for f in files}
    graph = {f: {t for t in ts if t.name != "__init__.py"} for f, ts in graph.items()}
    cycles = [" → ".join(p.stem for p in c) for c in import_graph.import_cycles(graph)]
    assert not cycles, f"import cycles: {cycles}"
