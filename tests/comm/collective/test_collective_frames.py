"""The seven collectives' animations, recorded on 3 ranks with root 2: the last frame of
each holds what the collective promises, worked out here from the pieces' values
(rank q's piece j is 10q + j + 1), and what the run and torch's own ended with; the
schedules take the rounds their theory says; a gather message sent to the wrong slot,
or to the wrong rank, fails the final-frame check."""

from __future__ import annotations

from dataclasses import replace

import pytest

from snippets.comm import trace_frames as T
from snippets.comm.collective.collective_frames import CASES, record_collective
from snippets.comm.messages import Send
from snippets.core.player import check_animation, frame_values
from snippets.core.runtime import launch

P, ROOT = 3, 2


def record_rank() -> dict:
    return {name: record_collective(name) for name in CASES}


@pytest.fixture(scope="module")
def anims() -> dict:
    return launch(record_rank, P, backend="gloo", timeout_s=60)[0]


def piece(q: int, j: int) -> float:
    return 10 * q + j + 1


def promised(name: str) -> list[list]:
    """Each rank's slots after the collective, by hand; None: nothing defined."""
    ranks, slots = range(P), range(P)
    summed = [sum(piece(q, j) for q in ranks) for j in slots]
    if name == "broadcast":
        return [[piece(ROOT, 0), piece(ROOT, 1)] for _ in ranks]
    if name == "reduce":
        return [summed[:2] if r == ROOT else [None, None] for r in ranks]
    if name == "scatter":
        mine = [[piece(ROOT, j) if j == r else None for j in slots] for r in ranks]
        return mine[:ROOT] + [[piece(ROOT, j) for j in slots]] + mine[ROOT + 1 :]
    if name in ("gather", "all_gather"):
        full = [piece(j, 0) for j in slots]
        return [
            full
            if r == ROOT or name == "all_gather"
            else [piece(r, 0) if j == r else None for j in slots]
            for r in ranks
        ]
    if name == "reduce_scatter":
        return [[summed[j] if j == r else None for j in slots] for r in ranks]
    # all_to_all: slot i·p + j is i's piece for j; rank r keeps its row, gets column r
    return [
        [piece(k // P, k % P) if r in (k // P, k % P) else None for k in range(P * P)]
        for r in ranks
    ]


def test_every_last_frame_holds_what_the_collective_promises(anims: dict) -> None:
    assert set(anims) == set(CASES)
    for name, anim in anims.items():
        want = promised(name)
        assert anim["final"] == want, name  # the run's buffers
        last = anim["frames"][-1]
        drawn = frame_values(last["cells"], anim["inputs"])
        for row, wrow in zip(drawn, want):
            for got, w in zip(row, wrow):
                assert w is None or got == w, name
        check_animation(anim, want)
        assert anim["frames"][0]["messages"] == [], name
        assert all(f["messages"] for f in anim["frames"][1:]), name


def test_pieces_start_empty_and_move_without_summing(anims: dict) -> None:
    start = anims["gather"]["frames"][0]["cells"]
    assert start == [[[r] if j == r else [] for j in range(P)] for r in range(P)]
    root_row = anims["gather"]["frames"][-1]["cells"][ROOT]
    assert root_row == [[0], [1], [2]]  # one rank each: copied, not added
    scattered = anims["scatter"]["frames"][-1]["cells"]
    assert all(scattered[r][r] == [ROOT] for r in range(P))
    moved = anims["all_to_all"]["frames"][-1]["cells"]
    assert all(moved[j][i * P + j] == [i] for i in range(P) for j in range(P))
    assert anims["reduce_scatter"]["frames"][-1]["cells"][1][1] == [0, 1, 2]


def test_rounds_follow_the_schedules(anims: dict) -> None:
    steps = {name: len(a["frames"]) - 1 for name, a in anims.items()}
    assert steps == {  # ⌈log2 3⌉ = 2 for trees, 1 for fans, p − 1 = 2 for rings
        "broadcast": 2,
        "reduce": 2,
        "scatter": 1,
        "gather": 1,
        "all_gather": 2,
        "reduce_scatter": 2,
        "all_to_all": 2,
    }
    ring = anims["all_gather"]["frames"][1:]
    assert all(m["dst"] == (m["src"] + 1) % P for f in ring for m in f["messages"])


def test_a_misdirected_gather_message_fails_the_check(anims: dict) -> None:
    anim = anims["gather"]
    trace = [
        Send(k, m["src"], m["dst"], m["start"], m["stop"], m["bytes"], "gather")
        for k, f in enumerate(anim["frames"])
        for m in f["messages"]
    ]
    start = anim["frames"][0]["cells"]

    def rebuilt(sends: list[Send]) -> dict:
        return T.animation(sends, anim["inputs"], anim["final"], "g", start=start)

    check_animation(rebuilt(trace), anim["final"])
    # rank 0's piece into slot 1 (rank 1's then overwrites it), or to rank 1
    for bad in (replace(trace[0], start=1, stop=2), replace(trace[0], dst=1)):
        wrong = [bad] + trace[1:]
        with pytest.raises(AssertionError, match="last frame"):
            check_animation(rebuilt(wrong), anim["final"])
