"""Tests for snippets.comm.ping_pong: the one latency measurement both notes use."""

from __future__ import annotations

import pytest
import torch.distributed as dist

from snippets.comm import ping_pong
from snippets.comm.cost import cost_model
from snippets.core.runtime import launch
from snippets.hardware import p2p_bandwidth


def _on_ranks() -> dict:
    rank = dist.get_rank()
    world = ping_pong.ping_pong([4, 1 << 16], src=2, dst=0, iters=3)  # rank 1 idles
    sub = dist.new_group([1, 2])  # group ranks 0, 1 are global ranks 1, 2
    inner = (
        ping_pong.ping_pong([64], src=1, dst=0, iters=2, group=sub)
        if rank in (1, 2)
        else None
    )
    return {"world": world, "inner": inner}


def test_any_pair_in_the_world_and_in_a_sub_group():
    # a wrong peer (a group rank used as a global one) would hang, and time out
    out = launch(_on_ranks, 3, backend="gloo", timeout_s=60)
    assert all(len(r["world"]) == 2 and min(r["world"]) > 0 for r in out)
    # the timer keeps the slowest rank's time, so every rank reports the same numbers
    assert out[0]["world"] == out[1]["world"] == out[2]["world"]
    assert out[0]["inner"] is None and out[1]["inner"] == out[2]["inner"]


def test_both_notes_measure_latency_with_it():
    # both keep every round: the median and its spread come from the same rounds
    assert cost_model.ping_pong_rounds is ping_pong.ping_pong_rounds
    assert p2p_bandwidth.ping_pong_rounds is ping_pong.ping_pong_rounds


@pytest.mark.parametrize("kwargs", [{"src": 1, "dst": 1}, {"iters": 0}, {"sizes": [0]}])
def test_bad_arguments_raise_before_any_message(kwargs):
    args = {"sizes": [4], "src": 0, "dst": 1, "iters": 1} | kwargs
    with pytest.raises(ValueError):
        ping_pong.ping_pong(**args)
