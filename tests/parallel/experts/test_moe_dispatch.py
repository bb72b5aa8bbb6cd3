"""The dispatch animation: built from the layer's record alone, its end equals the
dense routing, what it moves equals the split sizes the exchange used, dropped tokens
are drawn as dropped, and a record that disagrees with the oracle is refused."""

from __future__ import annotations

import copy

import pytest

from snippets.core.player import check_animation, player_data
from snippets.core.runtime import launch
from snippets.parallel.experts import moe_dispatch


def records_of_a_run() -> list:
    import torch.distributed as dist

    from snippets.models.moe import MoE
    from snippets.parallel.experts.expert_parallel import ExpertParallelMoE

    dense = MoE(moe_dispatch.DIM, 16, moe_dispatch.EXPERTS, 1, moe_dispatch.CAPACITY, 5)
    ep = ExpertParallelMoE.from_dense(dense, None)
    ep.record = []
    ep(moe_dispatch.tokens_of(dist.get_rank()))
    return ep.record[0]


@pytest.fixture(scope="module")
def records() -> list:
    return launch(records_of_a_run, 2, "gloo", 60.0)


def test_the_run_checks_itself_and_draws_a_player() -> None:
    result = launch(moe_dispatch.main, 2, "gloo", 60.0)[0]
    assert result["dropped"] >= 1  # capacity 1.0 turns a token away in this run
    assert result["parts"]["player"]["kind"] == "player"


def test_what_moves_is_what_the_exchange_sent(records) -> None:
    drawn = moe_dispatch.frames(records, moe_dispatch.EXPERTS // 2)
    for frame, key in ((drawn[2], "send"), (drawn[3], "recv")):
        moved = {
            (m["src"], m["dst"]): m["stop"] - m["start"] for m in frame["messages"]
        }
        for src, r in enumerate(records):
            for dst, count in enumerate(r[key]):
                if dst != src:
                    assert moved.get((src, dst), 0) == count


def test_dropped_tokens_come_home_drawn_as_dropped(records) -> None:
    drawn = moe_dispatch.frames(records, moe_dispatch.EXPERTS // 2)
    for r, rec in enumerate(records):
        gone = [t for t, kept in enumerate(rec["keep"]) if not kept]
        last = drawn[-1]
        for t in gone:
            assert last["values"][r][t] == moe_dispatch.DROPPED
            assert last["text"][r][t].endswith("×")
            assert last["tints"][r][t] == moe_dispatch.EXPERTS  # the "dropped" key


def test_a_record_that_routes_differently_is_caught(records) -> None:
    wrong = copy.deepcopy(records)
    wrong[0]["expert"] = [(e + 1) % moe_dispatch.EXPERTS for e in wrong[0]["expert"]]
    drawn = moe_dispatch.frames(wrong, moe_dispatch.EXPERTS // 2)
    from snippets.models.moe import MoE

    dense = MoE(moe_dispatch.DIM, 16, moe_dispatch.EXPERTS, 1, moe_dispatch.CAPACITY, 5)
    pad = [None] * (len(drawn[-1]["values"][0]) - moe_dispatch.TOKENS)
    expected = [row + pad for row in moe_dispatch.oracle(dense, 2)]
    anim = player_data(drawn, drawn[0]["values"], drawn[-1]["values"], "t")
    with pytest.raises(AssertionError, match="oracle"):
        check_animation(anim, expected)
