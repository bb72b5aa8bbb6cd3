"""The overlay's rules on the tiny GPT against hand counts: Megatron's split of each
layer, the rank grid as a reshaped arange, the ZeRO formulas, the collective counts."""

from __future__ import annotations

import itertools

import pytest
import torch

from snippets.models.tiny_gpt import GPTConfig
from snippets.viewer.parallel_overlay import (
    Degrees,
    collectives,
    rank_bytes,
    ranks_of_stage,
    stage,
)

COLUMN_SPLIT = ("attn.q.", "attn.k.", "attn.v.", "mlp.fc.", "tok_emb.")  # all of it
ROW_SPLIT = ("attn.proj.weight", "mlp.proj.weight")  # the weight, not the bias


def test_roles_and_stages_of_the_tiny_gpt(tiny) -> None:
    _, _, graph = tiny
    mods = {m["id"]: m for m in graph["modules"]}
    assert graph["stack"] == ["blocks.0", "blocks.1"]
    assert [mods[f"blocks.0.attn.{n}"]["tp"] for n in "qkv"] == ["column"] * 3
    assert mods["blocks.1.mlp.proj"]["tp"] == "row" and mods["tok_emb"]["tp"] == "vocab"
    assert mods["pos_emb"]["tp"] == mods["ln_f"]["tp"] == ""
    at = {k: stage(mods[k]["layer"], 2, 2) for k in ("tok_emb", "blocks.1.ln1", "ln_f")}
    assert at == {"tok_emb": 0, "blocks.1.ln1": 1, "ln_f": 1}
    assert [stage(i, 3, 7) for i in range(-1, 8)] == [0, 0, 0, 0, 1, 1, 2, 2, 2]


@pytest.mark.parametrize("dp, pp, cp, tp", [(2, 3, 1, 2), (1, 2, 2, 3)])
def test_ranks_of_a_stage_are_a_slice_of_the_grid(dp, pp, cp, tp) -> None:
    grid = torch.arange(dp * pp * cp * tp).reshape(dp, pp, cp, tp)  # tp fastest
    d = Degrees(dp=dp, tp=tp, pp=pp, cp=cp)
    for s in range(pp):
        assert ranks_of_stage(s, d) == sorted(grid[:, s].flatten().tolist())


def test_bytes_per_rank_follow_megatron_and_zero(tiny) -> None:
    model, _, graph = tiny
    named = list(model.named_parameters())
    split = sum(
        p.numel()
        for n, p in named
        if n.endswith(ROW_SPLIT) or any(k in n for k in COLUMN_SPLIT)
    )
    full = sum(p.numel() for _, p in named)
    for tp, dp, zero in itertools.product((1, 2), (1, 2), (0, 1, 2, 3)):
        (row,) = rank_bytes(graph, Degrees(dp=dp, tp=tp, zero=zero))
        local = full - split + split / tp  # fp32 values on one TP rank
        assert row["weights"] == pytest.approx(4 * local / (dp if zero == 3 else 1))
        assert row["grads"] == pytest.approx(4 * local / (dp if zero >= 2 else 1))
        assert row["optimizer"] == pytest.approx(8 * local / (dp if zero else 1))
    two = rank_bytes(graph, Degrees(pp=2))
    assert two[0]["total"] + two[1]["total"] == rank_bytes(graph, Degrees())[0]["total"]


def test_collectives_megatron_counts(tiny) -> None:
    _, args, graph = tiny
    cfg, (B, N) = GPTConfig(), args[0].shape
    act = B * N * cfg.n_embd * 4  # one fp32 activation (B, N, d)
    tp = [c for c in collectives(graph, Degrees(tp=2)) if c["kind"] == "tp"]
    # 4 all-reduces per layer (2 forward, 2 backward), the vocab embedding's forward
    # one and the head's backward one; each counted as 2× its tensor
    assert len(tp) == 4 * cfg.n_layer + 2
    assert all(c["bytes"] == 2 * act for c in tp)
    pp = collectives(graph, Degrees(pp=2))
    assert [(c["kind"], c["stage"], c["bytes"]) for c in pp] == [("pp", 0, 2 * act)]
    dp = collectives(graph, Degrees(dp=2, zero=3))
    assert sum(c["bytes"] for c in dp) == 3 * 4 * cfg.num_params()  # 3Ψ, fp32
    cp = [c for c in collectives(graph, Degrees(cp=2)) if c["kind"] == "cp"]
    assert len(cp) == cfg.n_layer and all(c["bytes"] == 2 * 2 * act for c in cp)
    assert collectives(graph, Degrees()) == []
