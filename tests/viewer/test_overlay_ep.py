"""Expert parallelism on the tiny GPT with mixtures: the placement against what
``ExpertParallelMoE.from_dense`` keeps on each rank and the mesh's ep groups; the
bytes against the sizing calculator's estimate(), which reads the model's dimensions
and never the graph, and against hand counts from the parameters."""

from __future__ import annotations

import pytest
import torch.distributed as dist
from torch.testing._internal.distributed.fake_pg import FakeStore

from snippets.core.errors import UsageError
from snippets.models.moe import MoE
from snippets.parallel.experts.expert_parallel import ExpertParallelMoE
from snippets.parallel.mesh import group_ranks
from snippets.sizing import presets
from snippets.sizing.estimate import estimate
from snippets.viewer.graph_export import export_graph
from snippets.viewer.model_viewer import tiny_gpt_inputs, tiny_moe_gpt
from snippets.viewer.overlay_bytes import collectives, rank_bytes
from snippets.viewer.overlay_dp import dp_markers
from snippets.viewer.overlay_ep import placement
from snippets.viewer.parallel_overlay import (
    Degrees,
    annotate,
    check_degrees,
    ep_rank,
    ranks_of_ep_rank,
)

E, K, D = 4, 2, 32  # tiny_moe_gpt: experts a mixture, top-k, width
MODEL = presets.MODELS["tiny-gpt"] | {"experts": E, "top_k": K, "expert_ffn": 4 * D}
STATES = {"weights": "weights", "grads": "gradients", "optimizer": "optimizer",
          "buffers": "buffers"}  # fmt: skip


@pytest.fixture(scope="module")
def moe():
    """(model, example args, annotated graph): drawn at module level, so seconds."""
    model, args = tiny_moe_gpt(), tiny_gpt_inputs()
    return model, args, annotate(export_graph(model, args))


def held_by_expert_parallel(layer: MoE, ep: int) -> list[list[int]]:
    """The experts ExpertParallelMoE.from_dense keeps on each of ep ranks: each rank
    is built in turn in a process group of ep ranks that only pretends to be one."""
    found = []
    for r in range(ep):
        dist.init_process_group("fake", store=FakeStore(), rank=r, world_size=ep)
        try:
            found.append(
                sorted(int(e) for e in ExpertParallelMoE.from_dense(layer).experts)
            )
        finally:
            dist.destroy_process_group()
    return found


@pytest.mark.parametrize("ep", [1, 2, 4])
def test_each_expert_where_expert_parallel_keeps_it(moe, ep) -> None:
    model, _, graph = moe
    mods = {m["id"]: m for m in graph["modules"]}
    for i, block in enumerate(model.blocks):
        want = held_by_expert_parallel(block.mlp, ep)
        experts = mods[f"blocks.{i}.mlp"]["moe"]["experts"]
        assert experts == [f"blocks.{i}.mlp.experts.{e}" for e in range(E)]
        got = [[e for e in range(E) if ep_rank(e, E, ep) == r] for r in range(ep)]
        assert got == want
        for e, module in enumerate(experts):  # the expert and all inside it
            inside = [m for m in graph["modules"] if m["id"].startswith(module)]
            assert {m["expert"]["index"] for m in inside} == {e}
    rows = placement(graph, Degrees(dp=4, ep=ep))
    assert [r["EP rank"] for r in rows] == [next(
        r for r, mine in enumerate(want) if e in mine) for e in range(E)]  # fmt: skip


@pytest.mark.parametrize("dp, pp, cp, tp, ep", [(4, 1, 1, 2, 2), (8, 2, 2, 1, 4)])
def test_ranks_at_an_ep_rank_are_the_mesh_groups_members(dp, pp, cp, tp, ep) -> None:
    groups = group_ranks("ep", (dp, pp, cp, tp), ep)  # each: EP ranks 0 … ep-1
    d = Degrees(dp=dp, tp=tp, pp=pp, cp=cp, ep=ep)
    per_stage = dp * cp * tp
    for s in range(pp):
        for r in range(ep):
            want = sorted(g[r] for g in groups if (g[r] // (cp * tp)) % pp == s)
            assert ranks_of_ep_rank(s, r, d) == want
            assert len(want) == per_stage // ep


def test_experts_are_whole_under_tp(moe) -> None:
    _, _, graph = moe
    mods = {m["id"]: m for m in graph["modules"]}
    assert mods["blocks.0.mlp.experts.0.fc"]["tp"] == ""  # fc by name, but an expert
    assert mods["blocks.0.mlp.router"]["tp"] == ""
    assert mods["blocks.0.attn.q"]["tp"] == "column"
    tp = collectives(graph, Degrees(tp=2))  # attention's two places a layer, only
    assert {c["at"].split(".")[2] for c in tp} == {"ln1()", "attn"}
    assert len(tp) == 2 * len(graph["stack"])


@pytest.mark.parametrize(
    "dp, tp, pp, cp, zero, sp, ep",
    [
        (2, 1, 1, 1, 0, False, 2),
        (4, 2, 1, 1, 1, False, 2),
        (4, 2, 1, 1, 1, True, 4),
        (8, 2, 1, 1, 2, True, 4),
        (8, 1, 1, 1, 3, False, 2),
        (4, 2, 1, 1, 0, False, 1),
    ],
)
def test_overlay_equals_estimate(moe, dp, tp, pp, cp, zero, sp, ep) -> None:
    _, args, graph = moe
    d = Degrees(dp, tp, pp, cp, zero, sp, ep)
    want = estimate(
        MODEL,
        presets.GPUS["h100-sxm"],
        seq=args[0].shape[1],
        precision="fp32",
        **dict(dp=dp, tp=tp, pp=pp, cp=cp, zero=zero, ep=ep, sequence_parallel=sp),
    )
    top = max(rank_bytes(graph, d), key=lambda r: r["weights"])
    mem, comm = want["memory_bytes"], want["comm_bytes_per_step"]
    for col, key in STATES.items():
        assert top[col] == pytest.approx(mem[key], rel=1e-12), col
    for kind in ("tp", "dp", "ep"):
        assert top[kind] == pytest.approx(comm[kind], rel=1e-12), kind
    assert dp_markers(graph, d)[""]["bytes"] == pytest.approx(comm["dp"], rel=1e-12)


def test_all_to_alls_and_expert_states_by_hand(moe) -> None:
    model, args, graph = moe
    B, N = args[0].shape
    expert = sum(p.numel() for p in model.blocks[0].mlp.experts[0].parameters())
    for ep, tp in ((2, 1), (4, 2)):
        d = Degrees(dp=4, tp=tp, ep=ep)
        a2a = [c for c in collectives(graph, d) if c["kind"] == "ep"]
        rows = K * B * N / tp  # token-expert pairs a rank dispatches (fp32, D wide)
        assert [(c["at"], c["name"].split(":")[0]) for c in a2a] == [
            (f"blocks.{i}.mlp", name)
            for i in range(len(model.blocks))
            for name in ("dispatch", "combine")
        ]
        for c in a2a:  # forward, and reversed in backward: (ep-1)/ep leaves the rank
            assert c["bytes"] == pytest.approx(2 * rows * D * 4 * (ep - 1) / ep)
        (row,) = rank_bytes(graph, d)
        assert row["ep"] == pytest.approx(sum(c["bytes"] for c in a2a))
        dense = rank_bytes(graph, Degrees(dp=4, tp=tp))[0]  # every expert, no EP
        held = len(model.blocks) * E * expert * (1 - 1 / ep)  # what EP leaves off
        assert dense["weights"] - row["weights"] == pytest.approx(4 * held)
    assert not [c for c in collectives(graph, Degrees(dp=4)) if c["kind"] == "ep"]
    # ZeRO-3 over dp·cp, experts over the dp·cp/ep ranks with the same experts: each
    # holds 1/n and gathers the rest of the largest block, experts apart
    other = sum(p.numel() for n, p in model.blocks[0].named_parameters()
                if ".experts." not in n)  # fmt: skip
    (row,) = rank_bytes(graph, Degrees(dp=8, zero=3, ep=2))
    gathered = 4 * other * (1 - 1 / 8) + 4 * E / 2 * expert * (1 - 1 / 4)
    assert row["buffers"] == pytest.approx(gathered)


def test_expert_dp_markers_are_their_holders(moe) -> None:
    model, _, graph = moe
    expert = sum(p.numel() for p in model.blocks[0].mlp.experts[0].parameters())
    marks = dp_markers(graph, Degrees(dp=8, ep=2))  # plain DP over 4 holders each
    own = marks["blocks.0.mlp.experts.1"]
    assert own["group"] == 4 and own["bytes"] == pytest.approx(2 * 3 / 4 * 4 * expert)
    experts = marks["blocks.0.mlp.experts"]["bytes"]  # a rank holds 2 of the 4
    assert experts == pytest.approx(2 * own["bytes"])
    assert "blocks.0.mlp.experts.0" not in dp_markers(graph, Degrees(dp=2, ep=2))


@pytest.mark.parametrize(
    "d, says",
    [
        (Degrees(dp=2, ep=4), "ep 4 does not divide dp = 2"),
        (Degrees(dp=6, ep=3), "ep 3 does not split the 4 experts of blocks.0.mlp"),
        (Degrees(dp=8, ep=8), "ep 8 does not split the 4 experts"),
    ],
)
def test_degrees_that_do_not_fit_are_one_line(moe, d, says) -> None:
    _, _, graph = moe
    for call in (check_degrees, collectives, rank_bytes):
        with pytest.raises(UsageError, match=says) as refused:
            call(graph, d)
        assert "\n" not in str(refused.value)
