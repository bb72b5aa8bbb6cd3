"""The site's own JavaScript (docs/assets) is ES modules that share nothing through the
global object: a file exports what others use, and they import it. Biome's
noUndeclaredVariables (biome.json, run by `make lint`) refuses a read of a name no
file imports or declares; this refuses the other half, a file that puts a name on
``window`` for another to read."""

from __future__ import annotations

import json
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
ASSETS = REPO / "docs" / "assets"
# window.NAME = …, globalThis.NAME = …, self.NAME = …, and Object.assign(window, …)
ASSIGNED = re.compile(
    r"\b(?:window|globalThis|self)\s*(?:\.\s*([\w$]+)|\[[^\]]+\])\s*=(?!=)"
    r"|Object\.assign\(\s*(?:window|globalThis|self)\b"
)
# for tests and the curious in the browser's console; no file reads it
FOR_PEOPLE = {"sizing/widget.js": {"cpSizing"}}
# the standalone viewer's data file (snippets/viewer/viewer_page.py writes it)
READ_FROM_PAGE = {"MODEL_GRAPH", "MODEL_VIEW_START"}
# what the browser and Material provide
PLATFORM = {"matchMedia", "ResizeObserver", "IntersectionObserver", "document$"}


def scripts() -> list[Path]:
    found = sorted(ASSETS.rglob("*.js"))
    assert len(found) >= 10, found
    return found


def test_no_file_puts_a_name_on_the_global_object() -> None:
    for path in scripts():
        name = path.relative_to(ASSETS).as_posix()
        text = path.read_text(encoding="utf-8")
        put = {m[1] or m[0] for m in ASSIGNED.finditer(text)}
        assert put <= FOR_PEOPLE.get(name, set()), (
            f"{name} sets window.{put}: export it"
        )


def test_no_file_reads_a_name_another_put_on_window() -> None:
    allowed = READ_FROM_PAGE | PLATFORM | set().union(*FOR_PEOPLE.values())
    for path in scripts():
        text = path.read_text(encoding="utf-8")
        read = set(re.findall(r"\bwindow\.([\w$]+)", text)) - allowed
        assert not read, f"{path.name} reads window.{read}: import it"


def test_a_module_exports_one_list_and_imports_by_relative_path() -> None:
    """The standalone viewer folder turns the modules into one classic script
    (viewer_page.classic_script), which reads exactly these two forms."""
    for path in scripts():
        text = path.read_text(encoding="utf-8")
        exports = re.findall(r"^export\b.*", text, re.M)
        assert len(exports) <= 1 and all(e.startswith("export {") for e in exports), (
            path.name,
            exports,
        )
        for spec in re.findall(r'^import .* from "([^"]+)";$', text, re.M):
            assert spec.startswith(("./", "../")) and spec.endswith(".js"), spec
            assert (path.parent / spec).resolve().is_file(), (path.name, spec)
        assert "require(" not in text, path.name


def test_biome_refuses_an_undeclared_name() -> None:
    config = json.loads((REPO / "biome.json").read_text(encoding="utf-8"))
    rules = config["linter"]["rules"]
    assert rules["correctness"]["noUndeclaredVariables"] == "error"
    assert set(config["javascript"]["globals"]) <= PLATFORM | {"dagre", "vegaEmbed"}
    makefile = (REPO / "Makefile").read_text(encoding="utf-8")
    assert "biome ci docs/assets" in makefile.split("\nlint:", 1)[1].split("\n\n")[0]
