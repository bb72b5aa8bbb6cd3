"""The animations' frames: replayed from each all-reduce's own trace, their last frame
holds what the run's buffers held, which is the elementwise sum of every rank's input
(worked out here by hand, not by the code under test); a trace with one message sent
to the wrong neighbour fails that check."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from snippets.comm import trace_frames as T
from snippets.comm.algorithms.allreduce import ALGORITHMS
from snippets.comm.algorithms.ring_allreduce import ring_allreduce
from snippets.comm.messages import gather_trace
from snippets.core.player import check_animation, frame_values
from snippets.core.runtime import launch


def record_rank() -> dict:
    import torch.distributed as dist

    anims = {name: T.record_allreduce(fn, name) for name, fn in ALGORITHMS.items()}
    x = torch.arange(3, dtype=torch.float64) + 10 * dist.get_rank()
    inputs: list = [None] * dist.get_world_size()
    dist.all_gather_object(inputs, x.tolist())
    trace: list = []
    ring_allreduce(x, trace=trace)
    return {"anims": anims, "ring": (gather_trace(trace), inputs, x.tolist())}


@pytest.fixture(scope="module")
def run() -> dict:
    return launch(record_rank, 3, backend="gloo", timeout_s=60)[0]


def test_every_last_frame_holds_the_sum_of_all_inputs(run: dict) -> None:
    assert set(run["anims"]) == set(ALGORITHMS)
    for name, anim in run["anims"].items():
        p, n = anim["ranks"], anim["numel"]
        total = [sum(anim["inputs"][r][i] for r in range(p)) for i in range(n)]
        assert anim["final"] == [total] * p, name  # what the run's tensors held
        last = anim["frames"][-1]["cells"]
        assert last == [[list(range(p))] * n] * p, name  # each input exactly once
        assert frame_values(last, anim["inputs"]) == [total] * p, name
        assert anim["final_labels"] == [["0–2"] * n] * p, name
        assert anim["frames"][0]["messages"] == [], name
        assert all(f["messages"] for f in anim["frames"][1:]), name


def test_ring_frames_follow_the_theory(run: dict) -> None:
    frames = run["anims"]["ring"]["frames"]
    assert len(frames) == 1 + 2 * (3 - 1)  # the start, then 2(p−1) steps
    for f in frames[1:]:
        assert all(m["dst"] == (m["src"] + 1) % 3 for m in f["messages"])
    # after the reduce-scatter (step p−1), rank r holds chunk r+1 complete
    after = frames[2]["cells"]
    assert all(after[r][(r + 1) % 3] == [0, 1, 2] for r in range(3))


def test_a_message_to_the_wrong_neighbour_fails_the_final_frame_check(
    run: dict,
) -> None:
    trace, inputs, final = run["ring"]
    expected = [final] * 3
    check_animation(T.animation(trace, inputs, expected, "ring"), expected)
    # the last reduce-scatter message goes left instead of right: its chunk's owner
    # misses one input (a wrong first message would heal: the ring re-sums it)
    wrong = list(trace)
    k = max(i for i, s in enumerate(wrong) if s.phase == "reduce-scatter")
    wrong[k] = dataclasses.replace(wrong[k], dst=(wrong[k].src + 2) % 3)
    with pytest.raises(AssertionError, match="last frame"):
        check_animation(T.animation(wrong, inputs, expected, "ring"), expected)
    copied = [dataclasses.replace(s, phase="all-gather") for s in trace]
    with pytest.raises(AssertionError, match="last frame"):  # adds replayed as copies
        check_animation(T.animation(copied, inputs, expected, "ring"), expected)
    with pytest.raises(ValueError, match="not in ACTIONS"):
        T.replay([dataclasses.replace(trace[0], phase="gossip")], 3, 3)
