"""Which snippets and benchmarks exist, found by looking, never by a hand-kept list.

A concept module is any ``snippets/<name>.py`` (not starting with ``_``) that defines
``SPEC`` (a :class:`~snippets._runtime.Spec`) and ``main()``. A benchmark is any module
that defines ``BENCH = "<name>"`` and ``bench(argv) -> int``. The note that embeds a
snippet is found by reading ``docs/`` for its include lines.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import snippets
from snippets._runtime import Spec

PACKAGE_DIR = Path(snippets.__file__).resolve().parent
REPO_DIR = PACKAGE_DIR.parent
DOCS_DIR = REPO_DIR / "docs"


@dataclass(frozen=True)
class Entry:
    name: str
    module: ModuleType

    @property
    def spec(self) -> Spec:
        return self.module.SPEC

    @property
    def path(self) -> Path:
        return Path(self.module.__file__)


def _modules() -> list[ModuleType]:
    names = sorted(info.name for info in pkgutil.iter_modules([str(PACKAGE_DIR)]) if not info.name.startswith("_"))
    return [importlib.import_module(f"snippets.{name}") for name in names]


def snippets_by_name() -> dict[str, Entry]:
    return {m.__name__.rsplit(".", 1)[1]: Entry(m.__name__.rsplit(".", 1)[1], m)
            for m in _modules() if isinstance(getattr(m, "SPEC", None), Spec) and callable(getattr(m, "main", None))}


def benches_by_name() -> dict[str, ModuleType]:
    return {m.BENCH: m for m in _modules() if isinstance(getattr(m, "BENCH", None), str) and callable(getattr(m, "bench", None))}


def notes_embedding(name: str) -> list[Path]:
    """Notes (relative to docs/) that include this snippet's code or results."""
    pattern = re.compile(rf"""--8<--\s+["'](?:snippets/{name}\.py|results/{name}\.)""")
    if not DOCS_DIR.is_dir():
        return []
    return sorted(p.relative_to(DOCS_DIR) for p in DOCS_DIR.rglob("*.md") if pattern.search(p.read_text(encoding="utf-8")))


def local_imports(path: Path) -> set[str]:
    """Names of the snippets modules this file imports (for the result cache's hash)."""
    text = path.read_text(encoding="utf-8")
    found = set(re.findall(r"^\s*from\s+(?:snippets)?\.(\w+)\s+import", text, re.M))
    found |= set(re.findall(r"^\s*(?:from|import)\s+snippets\.(\w+)", text, re.M))
    found |= {n for group in re.findall(r"^\s*from\s+snippets\s+import\s+([\w, ]+)", text, re.M) for n in group.replace(" ", "").split(",")}
    return {n for n in found if (PACKAGE_DIR / f"{n}.py").exists()}
