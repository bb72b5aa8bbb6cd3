"""The DP and ZeRO markers against the sizing calculator's estimate(), which reads
the model's dimensions and never the graph, and against the parameters counted
from the model itself (tied weights once, as ``model.parameters()`` gives them)."""

from __future__ import annotations

import pytest

from snippets.sizing import presets
from snippets.viewer.overlay_bytes import calculator
from snippets.viewer.overlay_dp import dp_markers
from snippets.viewer.parallel_overlay import Degrees


@pytest.mark.parametrize(
    "dp, tp, pp, cp, zero, sp",
    [
        (2, 1, 1, 1, 0, False),
        (4, 2, 1, 1, 1, False),
        (2, 2, 1, 2, 2, True),
        (8, 1, 1, 1, 3, False),
        (1, 2, 1, 2, 3, False),  # the ZeRO group is dp × cp
        (2, 2, 2, 1, 1, True),
        (4, 1, 2, 2, 3, False),
    ],
)
def test_markers_sum_to_the_calculators_traffic(tiny, dp, tp, pp, cp, zero, sp):
    model, args, graph = tiny
    d = Degrees(dp, tp, pp, cp, zero, sp)
    want = calculator(presets.MODELS["tiny-gpt"], args[0].shape[1], d)
    want = want["comm_bytes_per_step"]["dp"]
    marks = dp_markers(graph, d)
    holders = {n.rpartition(".")[0] for n, _ in model.named_parameters()}
    if pp > 1:  # the last stage holds its own copy of the tied embedding
        holders.add("lm_head")
    assert {k for k, v in marks.items() if v["own"]} == holders
    per_stage: dict[int, float] = {}
    for k in holders:  # every parameter-holding node, each rank of its stage
        (s,) = marks[k]["stages"]
        per_stage[s] = per_stage.get(s, 0.0) + marks[k]["own"]
    assert max(per_stage.values()) == pytest.approx(want, rel=1e-12)
    assert marks[""]["stages"] == pytest.approx(per_stage, rel=1e-12)
    if pp == 1:
        assert marks[""]["bytes"] == pytest.approx(want, rel=1e-12)
    kids: dict[str, list[str]] = {}
    for m in graph["modules"]:
        kids.setdefault(m["parent"], []).append(m["id"])
    for k, mark in marks.items():  # a node = its own + its children's; parts add up
        below = sum(marks[c]["bytes"] for c in kids.get(k, []) if c in marks)
        assert mark["bytes"] == pytest.approx(mark["own"] + below, rel=1e-12)
        assert sum(p["bytes"] for p in mark["parts"]) == pytest.approx(mark["bytes"])


def test_collectives_and_bytes_from_the_parameter_count(tiny) -> None:
    model, _, graph = tiny
    P = sum(p.numel() for p in model.parameters())  # the tied weight once
    n_blocks = sum(p.numel() for p in model.blocks.parameters())
    holders = len({n.rpartition(".")[0] for n, _ in model.named_parameters()})

    def parts(d: Degrees, node: str = "") -> dict:
        marks = dp_markers(graph, d)[node]["parts"]
        return {(p["collective"], p["of"], p["when"]): p for p in marks}

    (ar,) = parts(Degrees(dp=4)).values()  # plain DP: one gradient all-reduce
    assert (ar["collective"], ar["of"], ar["payload"]) == ("all_reduce", "grads", 4 * P)
    assert ar["bytes"] == pytest.approx(2 * 3 / 4 * 4 * P)  # ring: 2(n-1)/n
    assert parts(Degrees(dp=2), "blocks")["all_reduce", "grads", "after backward"][
        "payload"
    ] == pytest.approx(4 * n_blocks)
    one = parts(Degrees(dp=4, zero=1))
    assert one["reduce_scatter", "grads", "after backward"]["payload"] == 4 * P
    assert one["all_gather", "params", "after the step"]["payload"] == 4 * P
    three = parts(Degrees(dp=4, zero=3))  # the ZeRO paper's 3Ψ
    ag = three["all_gather", "params", "before forward and backward"]
    rs = three["reduce_scatter", "grads", "during backward"]
    assert (ag["payload"], ag["calls"]) == (2 * 4 * P, 2 * holders)
    assert (rs["payload"], rs["calls"]) == (4 * P, holders)
    assert ag["bytes"] + rs["bytes"] == pytest.approx(3 / 4 * 3 * 4 * P)
    assert dp_markers(graph, Degrees(tp=2, pp=2, zero=3)) == {}  # no DP group
