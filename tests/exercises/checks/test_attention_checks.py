"""The attention exercises' known-wrong solutions: each fails with the message that
names its mistake (the project's own and the stubs: test_every_exercise)."""

from __future__ import annotations

import pytest
from grading import graded_fixture, wrong  # noqa: F401

from snippets.exercises.catalog import exercise


@pytest.mark.parametrize(
    "name, mistake, says",
    [
        ("online_softmax_merge", "no_rescale", "hint: the older sum d_a is not resc"),
        ("online_softmax_merge", "one_side", "hint: d_b is not rescaled"),
        ("online_softmax_merge", "nan", "hint: NaN where a row is all -inf"),
        ("flash_forward", "unnormalised", "hint: O is not divided by the row sum"),
        ("flash_forward", "diagonal", "hint: the diagonal is masked"),
        ("flash_forward", "whole", "the whole 37x37 score matrix?"),
        ("ring_attention_forward", "short", "hint: the keys of rank 1 are missing"),
        ("ring_attention_forward", "builtin", "calls torch.distributed.all_gather"),
    ],
)
def test_known_wrong_solutions_are_rejected(graded, name, mistake, says) -> None:
    options = ("-n", "2") if exercise(name).distributed else ()
    code, out = graded(name, wrong(f"{name}_{mistake}"), *options)
    assert code == 1, out
    assert says in out, out


def test_a_merge_that_never_returns_is_stopped_at_its_line(graded) -> None:
    file = wrong("online_softmax_merge_loops")
    code, out = graded("online_softmax_merge", file, "--timeout", "0.5")
    assert code == 1, out
    assert "it ran past 3 s, the one-process time limit" in out  # 6 timeouts in all
    assert "line 10, in merge: while not bool((m >= b.m).all()):" in out


def test_a_flash_forward_that_keeps_every_tile_of_a_row_block_fails(graded) -> None:
    """Exact, so only the memory contract catches it: a row block of 32 x 1024 scores
    (8 bytes each, B = 2, H = 3) is 1,572,864 bytes, far past one 32 x 8 tile."""
    code, out = graded("flash_forward", wrong("flash_forward_every_tile"))
    assert code == 1, out
    line = next(x for x in out.splitlines() if "FAIL" in x)
    assert "N=32, M=1024, tiles 32x8" in line and "score tiles of 32x8" in line, out
    held = int(line.split("it held ")[1].split(" bytes")[0])
    assert held >= 2 * 3 * 32 * 1024 * 8, out


def test_a_ring_attention_that_keeps_every_block_fails(graded) -> None:
    """At p = 5 it holds p - 1 = 4 received blocks at once; the project's holds at most
    three (two, and one a finished send's handle keeps)."""
    code, out = graded(
        "ring_attention_forward", wrong("ring_attention_forward_every_block"), "-n", "5"
    )
    assert code == 1, out
    assert "it kept 4 blocks of received K and V alive at once" in out, out


def test_a_one_process_exercise_that_raises_does_not_speak_of_ranks(
    graded, tmp_path
) -> None:
    file = tmp_path / "mine.py"
    file.write_text("def merge(a, b):\n    raise ValueError('not yet')\n")
    code, out = graded("online_softmax_merge", file)
    assert code == 1, out
    assert "it raised ValueError: not yet" in out, out
    assert "the check stopped there" in out and "rank" not in out, out
