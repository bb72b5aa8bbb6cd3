"""The stub a reader starts from: it loads, and carries the contract and the hints
within 88 columns."""

from __future__ import annotations

import pytest

from snippets.exercises.catalog import exercises
from snippets.exercises.engine.reader_file import load
from snippets.exercises.engine.verdict import stub


@pytest.mark.parametrize("ex", exercises(), ids=lambda ex: ex.name)
def test_every_stub_loads_and_carries_the_contract_and_hints(ex, tmp_path) -> None:
    text = stub(ex, f"python -m snippets exercise check {ex.name} FILE")
    file = tmp_path / "mine.py"
    file.write_text(text)
    assert load(ex, str(file))
    assert ex.contract.splitlines()[0] in text
    assert all(f"# hint: {h}" in text for h in ex.hints)
    assert max(len(line) for line in text.splitlines()) <= 88
