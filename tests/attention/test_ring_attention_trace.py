"""Ring attention's animation on 3 ranks, from main(): the block rank r holds after
step s is rank (r − s − 1)'s, as a ring to the right must give; every rank ends
having merged every block; the last frame's ℓ equals log-sum-exp over the whole
sequence, recomputed here on one process from the same seed; a wrong final ℓ fails
the final-frame check."""

from __future__ import annotations

import json

import pytest
import torch

from snippets.attention import ring_attention_trace as RT
from snippets.core.player import check_animation
from snippets.core.runtime import launch

P, N, D = 3, 3, 32


@pytest.fixture(scope="module")
def anim() -> dict:
    part = launch(RT.main, P, backend="gloo", timeout_s=60)[0]["parts"]["animation"]
    assert part["kind"] == "player"
    return json.loads(json.dumps(part["data"]))


def test_blocks_go_round_and_every_rank_merges_all(anim: dict) -> None:
    frames = anim["frames"]
    assert len(frames) == 1 + P
    for s, f in enumerate(frames[1:P]):  # steps with a message
        assert [c[0] for c in f["cells"]] == [[(r - s - 1) % P] for r in range(P)]
        assert sorted((m["src"], m["dst"]) for m in f["messages"]) == [
            (r, (r + 1) % P) for r in range(P)
        ]
        assert all(m["bytes"] == 2 * N * D * 8 for m in f["messages"])
    assert [c[1] for c in frames[-1]["cells"]] == [[0, 1, 2]] * P
    assert frames[-1]["messages"] == []


def test_the_last_l_is_the_whole_sequences_logsumexp(anim: dict) -> None:
    gen = torch.Generator().manual_seed(7)
    q, k, _ = (torch.randn(P * N, D, generator=gen, dtype=torch.float64) for _ in "qkv")
    exact = [
        round(torch.logsumexp(q[r * N] @ k.T / D**0.5, 0).item(), 4) for r in range(P)
    ]
    want = [[None, e] for e in exact]
    assert anim["final"] == want
    check_animation(anim, want)
    bad = [[None, e + 0.01] for e in exact]
    with pytest.raises(AssertionError, match="last frame"):
        check_animation(anim, bad)
