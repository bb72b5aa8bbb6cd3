"""The grader's own rules: what a reader's function must take, what the stub holds,
and how a call is described. Grading itself is tested through the exercises."""

from __future__ import annotations

import pytest

from snippets.core.errors import UsageError
from snippets.exercises import engine
from snippets.exercises.catalog import exercise, exercises


def write(tmp_path, text: str):
    file = tmp_path / "mine.py"
    file.write_text(text)
    return str(file)


def test_more_parameters_are_allowed_only_with_defaults(tmp_path) -> None:
    ex = exercise("ring_allreduce")
    assert ex.parameters == ["tensor", "op", "group"]
    ok = "def ring_allreduce(tensor, op=None, group=None, *, trace=None):\n    pass\n"
    assert engine.load(ex, write(tmp_path, ok))
    bad = "def ring_allreduce(tensor, op=None, group=None, *, trace):\n    pass\n"
    with pytest.raises(UsageError, match="should take"):
        engine.load(ex, write(tmp_path, bad))


def test_a_file_that_raises_on_import_is_graded_not_refused(tmp_path) -> None:
    ex = exercise("ring_allreduce")
    with pytest.raises(engine.ImportFailed, match=r"ZeroDivisionError.*line 1"):
        engine.load(ex, write(tmp_path, "x = 1 / 0\n"))


@pytest.mark.parametrize("ex", exercises(), ids=lambda ex: ex.name)
def test_every_stub_loads_and_carries_the_contract_and_hints(ex, tmp_path) -> None:
    text = engine.stub(ex, f"python -m snippets exercise check {ex.name} FILE")
    assert engine.load(ex, write(tmp_path, text))
    assert ex.contract.splitlines()[0] in text
    assert all(f"# hint: {h}" in text for h in ex.hints)
    assert max(len(line) for line in text.splitlines()) <= 88


def test_a_call_says_which_way_it_went() -> None:
    assert str(engine.Call("isend", 2, 7)) == "isend to rank 2 (7 elements)"
    assert str(engine.Call("recv", 0, 1)) == "recv from rank 0 (1 elements)"
    assert str(engine.Call("all_reduce", None, 4)) == "all_reduce (4 elements)"
