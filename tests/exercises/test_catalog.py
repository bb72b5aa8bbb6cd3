"""The catalog: every exercise once, tied to a note that exists, in reading order; the
catalogue of words holds every field of every check's exercise, and nothing else."""

from __future__ import annotations

import ast
from importlib import resources

import pytest
from conftest import REPO

from snippets.core.errors import UsageError
from snippets.exercises import catalog
from snippets.exercises.catalog import (
    CATALOGUE,
    OPTIONAL,
    REQUIRED,
    SERIES,
    checks,
    exercise,
    exercises,
    note_facts,
    read_catalogue,
)


def test_names_are_unique_and_each_note_exists() -> None:
    names = [ex.name for ex in exercises()]
    assert len(names) == len(set(names))
    for ex in exercises():
        assert (REPO / "docs/blog/posts" / f"{ex.note}.md").is_file(), ex.note


def test_exercises_follow_the_series_and_their_parts() -> None:
    keys = []
    for ex in exercises():
        facts = note_facts(ex.note)
        assert facts["series"] in SERIES, facts
        keys.append((SERIES.index(facts["series"]), facts["part"]))
    assert keys == sorted(keys)


def test_series_are_the_sites_categories() -> None:
    config = (REPO / "mkdocs.yml").read_text()
    block = config.split("categories_allowed:")[1].split("\n  - ")[0]
    listed = [line.strip()[2:] for line in block.splitlines() if line.strip()]
    assert tuple(listed) == SERIES


def test_an_unknown_name_is_a_usage_error_naming_the_nearest() -> None:
    with pytest.raises(UsageError, match="did you mean ring_allreduce"):
        exercise("ring_alreduce")


def test_every_check_has_every_field_and_every_entry_a_check() -> None:
    entries = read_catalogue()
    names = [ex.name for ex in checks()]
    assert sorted(entries) == sorted(names)
    for name in names:
        assert set(REQUIRED) <= set(entries[name]) <= set(REQUIRED + OPTIONAL), name
        assert all(entries[name][f].strip() for f in REQUIRED if f != "imports"), name


GOOD = """## young_daly

### title

a title

### note

a-note

### solution

snippets/x.py:y

### imports

```python
import math
```

### contract

What it does.

### hints

- one
"""


@pytest.mark.parametrize(
    "change, says",
    [
        (("### title\n\na title\n\n", ""), "young_daly: field 'title' is missing"),
        (("- one\n", "one\n"), "young_daly: field 'hints' should be a list"),
        (("```python\nimport math\n```", "import math"), "young_daly: field 'imports'"),
        (("### note", "### notes"), "young_daly: field 'notes' is unknown"),
        (("a title", ""), "young_daly: field 'title' is empty"),
        (("## young_daly", "## nobody"), "nobody: an entry with no check"),
    ],
)
def test_a_bad_entry_is_one_line_naming_the_exercise_and_field(
    tmp_path, monkeypatch, change, says
) -> None:
    path = tmp_path / "exercises.md"
    real = CATALOGUE.read_text(encoding="utf-8")
    start = real.index("## young_daly\n")
    end = real.find("\n## ", start + 1) + 1 or len(real)
    path.write_text(real[:start] + GOOD.replace(*change) + real[end:], "utf-8")
    monkeypatch.setattr(catalog, "CATALOGUE", path)
    with pytest.raises(UsageError) as raised:
        catalog.exercises.__wrapped__()  # uncached: reads the file again
    assert says in str(raised.value) and "\n" not in str(raised.value)


PACKAGE = REPO / "snippets" / "exercises"
CODE = sorted((PACKAGE / "checks").glob("*.py")) + sorted(
    (PACKAGE / "engine").glob("*.py")
)


def docstrings(tree: ast.Module) -> set[int]:
    """The ids of the module's, classes' and functions' docstring constants."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef)):
            first = node.body[0] if node.body else None
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


@pytest.mark.parametrize("path", CODE, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_a_check_or_engine_file_holds_no_prose(path) -> None:
    """Words a reader reads belong in the catalogue: no string over 200 characters
    (adjacent literals count as one, an f-string by its literal parts)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = docstrings(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            text = "".join(v.value for v in node.values if isinstance(v, ast.Constant))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = "" if id(node) in skip else node.value
        else:
            continue
        assert len(text) <= 200, f"{path.name}, line {node.lineno}: {text[:60]}…"


@pytest.mark.parametrize(
    "path", [p for p in CODE if p.parent.name == "checks"], ids=lambda p: p.name
)
def test_a_check_file_imports_no_other_check_file(path) -> None:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    imported = [
        node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
    ]
    assert not [m for m in imported if m.startswith("snippets.exercises.checks")]


def test_the_catalogue_is_package_data() -> None:
    """It installs with the package: a wheel carries it, not only this checkout."""
    config = (REPO / "pyproject.toml").read_text(encoding="utf-8")
    data = config.split("[tool.setuptools.package-data]")[1].split("\n[")[0]
    assert f'"snippets.exercises" = ["{CATALOGUE.name}"]' in data
    assert (resources.files("snippets.exercises") / CATALOGUE.name).is_file()
