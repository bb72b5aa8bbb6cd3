"""The point-to-point animations. The deadlock, launched on its own ranks with a 1 s
group timeout, ends with both sends blocked, nothing delivered, both ranks stopped at
least 1 s after their sends, and the RankError that launch raised, the same kind as a
direct launch of the same exchange raises. The isend/irecv fix on 3 ranks (0↔1
paired, rank 2 sits out) ends with each rank holding its peer's value, 10·peer + 1 by
construction; replaying the deadlock's sends as delivered, or the fix's message into
the wrong slot, fails the final-frame check."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest

from snippets.comm import swap_frames as S
from snippets.comm import trace_frames as T
from snippets.comm.messages import Send
from snippets.core.player import check_animation
from snippets.core.runtime import RankError, launch

EXCHANGE = "snippets.comm.point_to_point:both_send_first"


def record_rank() -> dict:
    import torch.distributed as dist

    from snippets.comm.point_to_point import swap_nonblocking
    from snippets.comm.swap_frames import record_swap

    return record_swap(swap_nonblocking, dist.get_rank() ^ 1)


@pytest.fixture(scope="module")
def fixed() -> dict:
    return launch(record_rank, 3, backend="gloo", timeout_s=60)[0]


def sends_of(anim: dict, phase: str | None = None) -> list[Send]:
    return [
        Send(k, m["src"], m["dst"], m["start"], m["stop"], m["bytes"], phase or "send")
        for k, f in enumerate(anim["frames"])
        for m in f["messages"]
    ]


def test_the_deadlock_ends_with_both_ranks_stopped_by_the_runtime(tmp_path) -> None:
    anim = S.record_stopped(EXCHANGE, 1.0)
    with pytest.raises(RankError) as direct:  # the oracle: the same run, by hand
        launch(S._stuck_rank, 2, "gloo", 1.0, args=(EXCHANGE, str(tmp_path)))
    first, stuck, stopped = anim["frames"]
    msgs = stuck["messages"]
    assert sorted((m["src"], m["dst"], m["action"]) for m in msgs) == [
        (0, 1, "blocked"),
        (1, 0, "blocked"),
    ]
    assert all(m["bytes"] == 4 for m in msgs)  # one float32, the demo's tensor
    assert stopped["cells"] == first["cells"] == [[[0], []], [[], [1]]]
    # the last frame: the error launch raised, in one line, naming the first rank
    error, rank = anim["error"], anim["error_rank"]
    assert stopped["label"] == S.one_line(error) and len(stopped["label"]) <= 88
    assert error.startswith(f"rank {rank} failed: RuntimeError: ") and rank in (0, 1)
    cause = re.compile(r"Timed out waiting 1000ms for send")  # the cause, not its echo
    assert cause.search(error) and cause.search(str(direct.value)), error
    assert str(direct.value).split(":")[1] == error.split(":")[1]  # same type
    # the rank that failed was stopped no sooner than its group's timeout after its
    # send; its peer, stopped with it, may have sent a little later
    after = anim["after_s"]
    assert 1.0 <= after[rank] < 15 and 0.5 <= after[rank ^ 1] < 15, after
    assert stopped["stopped"] == [f"stopped after {a:.1f} s" for a in anim["after_s"]]
    # the same sends, had they been delivered, would fill the peers' slots
    delivered = T.animation(
        sends_of(anim), anim["inputs"], anim["final"], "x", start=first["cells"]
    )
    assert delivered["frames"][-1]["cells"][1][0] == [0]
    assert S.one_line("[a/b.cc:12] Timed out", 8) == "Timed o…"


def test_the_fix_delivers_each_peers_tensor(fixed: dict) -> None:
    anim = fixed
    want = [[1.0, 11.0, None], [1.0, 11.0, None], [None, None, 21.0]]
    assert anim["final"] == want
    check_animation(anim, want)
    assert [m["action"] for m in anim["frames"][1]["messages"]] == ["copy"] * 2
    start = anim["frames"][0]["cells"]
    sends = sends_of(anim, "isend")
    wrong = [replace(sends[0], start=2, stop=3)] + sends[1:]  # rank 1's slot 2
    bad = T.animation(wrong, anim["inputs"], anim["final"], "x", start=start)
    with pytest.raises(AssertionError, match="last frame"):
        check_animation(bad, want)
