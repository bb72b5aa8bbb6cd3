"""The point-to-point animations on 3 ranks (0↔1 paired, rank 2 sits out): the
deadlock, recorded from a run that really timed out, ends with both sends blocked and
nothing delivered; the isend/irecv fix ends with each rank holding its peer's value,
which is 10·peer + 1 by construction; replaying the deadlock's sends as delivered, or
the fix's message into the wrong slot, fails the final-frame check."""

from __future__ import annotations

from dataclasses import replace

import pytest

from snippets.comm import trace_frames as T
from snippets.comm.messages import Send
from snippets.core.runtime import launch


def record_rank() -> dict:
    import torch.distributed as dist

    from snippets.comm.point_to_point import deadlock_demo, swap_nonblocking
    from snippets.comm.swap_frames import record_deadlock, record_swap

    peer = dist.get_rank() ^ 1
    sends: list = []
    _, error = deadlock_demo(peer, 0.5, sends)
    stuck = record_deadlock(sends, error, 1.0, "0.5 s")
    return {"stuck": stuck, "fixed": record_swap(swap_nonblocking, peer)}


@pytest.fixture(scope="module")
def run() -> dict:
    return launch(record_rank, 3, backend="gloo", timeout_s=60)[0]


def sends_of(anim: dict, phase: str | None = None) -> list[Send]:
    return [
        Send(k, m["src"], m["dst"], m["start"], m["stop"], m["bytes"], phase or "send")
        for k, f in enumerate(anim["frames"])
        for m in f["messages"]
    ]


def test_the_deadlock_ends_with_both_sends_blocked_and_nothing_delivered(
    run: dict,
) -> None:
    anim = run["stuck"]
    assert len(anim["frames"]) == 2
    msgs = anim["frames"][1]["messages"]
    assert sorted((m["src"], m["dst"], m["action"]) for m in msgs) == [
        (0, 1, "blocked"),
        (1, 0, "blocked"),
    ]
    assert all(m["bytes"] == 4 for m in msgs)  # one float32, the demo's tensor
    last = anim["frames"][-1]["cells"]
    assert (
        last
        == anim["frames"][0]["cells"]
        == [
            [[0], [], []],
            [[], [1], []],
            [[], [], [2]],
        ]
    )
    # the same sends, had they been delivered, would fill the peers' slots
    delivered = T.animation(
        sends_of(anim), anim["inputs"], anim["final"], "x", start=last
    )
    assert delivered["frames"][-1]["cells"][1][0] == [0]


def test_the_fix_delivers_each_peers_tensor(run: dict) -> None:
    anim = run["fixed"]
    want = [[1.0, 11.0, None], [1.0, 11.0, None], [None, None, 21.0]]
    assert anim["final"] == want
    T.check_animation(anim, want)
    assert [m["action"] for m in anim["frames"][1]["messages"]] == ["copy"] * 2
    start = anim["frames"][0]["cells"]
    sends = sends_of(anim, "isend")
    wrong = [replace(sends[0], start=2, stop=3)] + sends[1:]  # rank 1's slot 2
    bad = T.animation(wrong, anim["inputs"], anim["final"], "x", start=start)
    with pytest.raises(AssertionError, match="last frame"):
        T.check_animation(bad, want)
