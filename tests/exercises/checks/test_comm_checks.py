"""The collectives' exercises: known-wrong solutions fail, each with the message that
names its mistake, and deadlocks end naming where each rank waited (the project's own
and the stubs: test_every_exercise)."""

from __future__ import annotations

import json

import pytest
from grading import graded_fixture, right, wrong  # noqa: F401

from snippets.exercises.engine import on_ranks


@pytest.mark.parametrize(
    "mistake, says",
    [
        ("builtin", "calls torch.distributed.all_reduce"),
        ("averaged", "hint: each element is the sum ÷ p"),
        ("off_by_one", "FAIL  SUM of a (1,) tensor"),
    ],
)
def test_known_wrong_ring_allreduces_are_rejected(graded, mistake, says) -> None:
    code, out = graded("ring_allreduce", wrong(f"ring_allreduce_{mistake}"), "-n", "3")
    assert code == 1, out
    assert says in out, out


def test_a_deadlocked_ring_is_stopped_and_each_rank_says_where_it_waited(
    graded,
) -> None:
    file = wrong("ring_allreduce_recv_first")
    code, out = graded("ring_allreduce", file, "-n", "3", "--timeout", "2")
    assert code == 1, out
    for rank, left in ((0, 2), (1, 0), (2, 1)):
        assert f"rank {rank} waited on recv from rank {left}" in out, out
    assert "line 12, in ring_allreduce: dist.recv(" in out


@pytest.mark.parametrize(
    "name, mistake, ranks, says",
    [
        ("ring_pass", "left", 3, "send right, receive from the left"),
        ("ring_pass", "global_ranks", 4, "it is global rank 3's tensor"),
        ("ring_pass", "strided", 3, "input tensor has to be contiguous"),
        ("ring_pass", "waits", 3, "start_pass waited on isend to rank 1"),
        ("tree_broadcast", "fan_out", 4, "rank 3 sends 3 messages; in a tree"),
        ("tree_broadcast", "root_zero", 3, "hint: the tensor is this rank's own"),
        ("tree_broadcast", "chain", 4, "the tree is 3 deep"),
        ("all_gather", "own_piece", 3, "hint: piece 0, this rank's own, is empty"),
        ("all_gather", "direct", 3, "receive only from rank 2: its neighbours"),
        ("reduce_scatter", "averaged", 3, "hint: each element is the sum ÷ p"),
        ("reduce_scatter", "next_piece", 3, "hint: it is piece 1's result"),
        ("all_to_all_single", "builtin", 3, "distributed.all_to_all_single: this"),
        ("all_to_all_single", "own_block", 3, "hint: block 0, this rank's own"),
        ("all_to_all_single", "empty_sends", 3, "an empty block sends nothing"),
        ("naive_allreduce", "everyone", 3, "talks only to the root"),
        ("naive_allreduce", "root_left_out", 3, "hint: the sum leaves out the root's"),
    ],
)
def test_known_wrong_solutions_are_rejected_naming_the_mistake(
    graded, name, mistake, ranks, says
) -> None:
    code, out = graded(name, wrong(f"{name}_{mistake}"), "-n", str(ranks))
    assert code == 1, out
    assert says in out, out


def test_a_ring_pass_of_blocking_sends_deadlocks_on_gloo_and_says_where(
    graded,
) -> None:
    file = wrong("ring_pass_blocking")
    code, out = graded("ring_pass", file, "-n", "3", "--timeout", "2")
    assert code == 1, out
    for rank, to in ((0, 1), (1, 2), (2, 0)):
        assert f"rank {rank} waited on send to rank {to}" in out, out
    assert "line 11, in start_pass: dist.send(" in out


def test_a_rank_that_only_saw_its_peer_go_is_not_named_for_the_stop(tmp_path) -> None:
    echo = "it raised RuntimeError: [pair.cc:553] Connection closed by peer [::1]:1"
    states = {
        0: {"failure": echo, "wait": "recv from rank 2 at line 12"},
        1: {"failure": "it waited past the 2 s timeout", "wait": "recv from rank 0"},
        2: {"failure": None, "wait": "recv from rank 1"},
    }
    for rank, s in states.items():
        case = {"title": "SUM", "failure": s["failure"], "detail": [], "stopped": True}
        state = {"cases": [case], "wait": s["wait"]}
        (tmp_path / f"rank{rank}.json").write_text(json.dumps(state))
    outcome = on_ranks.merge(str(tmp_path), 3)
    assert outcome.cases[0]["rank"] == 1
    assert outcome.stopped == "it waited past the 2 s timeout"
    assert sorted(outcome.waits) == [0, 1, 2]


@pytest.mark.parametrize("way", ["float64", "barrier"])
def test_a_ring_the_contract_allows_passes(graded, way) -> None:
    """Float64 on the wire is counted (every dtype is a message), and a barrier is not
    the all-reduce the exercise builds."""
    code, out = graded("ring_allreduce", right(f"ring_allreduce_{way}"), "-n", "3")
    assert code == 0, out
    assert "pass  only neighbours, 2(p-1) = 4 sends" in out, out


def test_the_functional_collectives_are_refused_by_name(graded) -> None:
    code, out = graded("ring_allreduce", wrong("ring_allreduce_functional"), "-n", "3")
    assert code == 1, out
    assert "calls torch.distributed._functional_collectives.all_reduce" in out, out


def test_an_all_to_all_that_ignores_its_splits_is_told_them(graded) -> None:
    file = wrong("all_to_all_single_even_splits")
    code, out = graded("all_to_all_single", file, "-n", "3")
    assert code == 1, out
    # the check's uneven splits at p = 3: rank i sends (3i + 2j + 1) % 4 rows to j
    rows = [[(3 * i + 2 * j + 1) % 4 for j in range(3)] for i in range(3)]
    said = [
        f"rank {r}'s input_split_sizes is {rows[r]} and its output_split_sizes "
        f"{[rows[i][r] for i in range(3)]}"
        for r in range(3)
    ]
    assert any(s in out for s in said), out
    assert "Connection reset by peer" not in out, out


def test_a_piece_never_written_is_called_that(graded) -> None:
    code, out = graded("all_gather", wrong("all_gather_own_piece"), "-n", "3")
    assert code == 1, out
    assert "got -100 (-100 is what it held before: never written)" in out, out


@pytest.mark.parametrize(
    "echo",
    [
        "it raised RuntimeError: [pair.cc:553] Connection closed by peer [::1]:1",
        "it raised RuntimeError: [pair.cc:589] Read error: Connection reset by peer",
        "it raised RuntimeError: [pair.cc:598] Write error: Broken pipe",
        "it raised ConnectionResetError: connection reset by peer",
    ],
)
def test_every_echo_of_a_peer_gone_gives_way_to_the_cause(tmp_path, echo) -> None:
    cause = "it raised ValueError: rank 1's own mistake"
    for rank, failure in ((0, echo), (1, cause)):
        case = {"title": "SUM", "failure": failure, "detail": [], "stopped": True}
        state = {"cases": [case], "wait": None}
        (tmp_path / f"rank{rank}.json").write_text(json.dumps(state))
    outcome = on_ranks.merge(str(tmp_path), 2)
    assert (outcome.cases[0]["rank"], outcome.stopped) == (1, cause)
