"""An exercise's names: from its function's signature, or from its own def line,
against what Python's inspect reads from the same def compiled."""

from __future__ import annotations

import inspect

import pytest

from snippets.exercises.engine.exercise import Exercise


def ring(tensor, op=None, group=None, *, trace=None):
    """Sum ``tensor`` over the ranks."""


def test_names_come_from_the_function_or_the_def_line() -> None:
    plain = Exercise("ring", ring, check=lambda fn, grade: None, world_sizes=(2, 3))
    assert plain.parameters == list(inspect.signature(ring).parameters)
    assert plain.distributed and plain.contract == "Sum ``tensor`` over the ranks."
    line = "def ring(tensor, /, group, *, trace=None):"
    namespace: dict = {}
    exec(line + "\n    pass\n", namespace)
    own = plain.with_words(signature=line, doc="Add them up.")
    assert own.parameters == list(inspect.signature(namespace["ring"]).parameters)
    assert own.contract == "Add them up." and own.name == "ring"
    assert not Exercise("one", ring, check=lambda fn, grade: None).distributed


def test_a_signature_that_is_not_a_def_line_is_named() -> None:
    broken = Exercise("x", ring, check=lambda f, g: None, signature="class x:")
    with pytest.raises(TypeError, match="x: its signature is not one def line"):
        broken.parameters
