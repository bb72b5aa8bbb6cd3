"""How a watched call is told: which way it went, and how much it carried."""

from __future__ import annotations

from snippets.exercises.engine.calls import Call


def test_a_call_says_which_way_it_went() -> None:
    assert str(Call("isend", 2, 7)) == "isend to rank 2 (7 elements)"
    assert str(Call("recv", 0, 1)) == "recv from rank 0 (1 elements)"
    assert str(Call("all_reduce", None, 4)) == "all_reduce (4 elements)"
