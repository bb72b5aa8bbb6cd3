"""Every exercise in the catalog, graded as a reader's file is: the project's own
solution passes at each world size the exercise names, and the untouched stub that
``exercise start`` writes fails with exit 1, naming NotImplementedError. The
known-wrong solutions, one file a mistake, are held in each series' own test file."""

from __future__ import annotations

import pytest
from grading import graded_fixture, solution_file  # noqa: F401

from snippets.exercises import engine
from snippets.exercises.catalog import exercises

EVERY = pytest.mark.parametrize("ex", exercises(), ids=lambda ex: ex.name)


@EVERY
def test_the_projects_solution_passes_at_every_world_size(graded, ex) -> None:
    code, out = graded(ex.name, solution_file(ex))
    assert code == 0 and "FAIL" not in out, out
    if ex.distributed:
        assert all(f"on {n} ranks" in out for n in ex.world_sizes), out
    else:
        assert "in one process" in out, out


@EVERY
def test_the_untouched_stub_fails_with_exit_1(graded, tmp_path, ex) -> None:
    stub = tmp_path / f"{ex.name}.py"
    stub.write_text(engine.stub(ex, "check"), encoding="utf-8")
    options = ("-n", str(min(ex.world_sizes))) if ex.distributed else ()
    code, out = graded(ex.name, stub, *options)
    assert code == 1 and "NotImplementedError" in out, out
