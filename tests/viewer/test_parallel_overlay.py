"""The overlay's rules on the tiny GPT against hand counts: Megatron's roles for each
layer, the stages, the rank grid as a reshaped arange; the bytes the page needs."""

from __future__ import annotations

import pytest
import torch

from snippets.sizing import memory
from snippets.viewer.parallel_overlay import Degrees, ranks_of_stage, stage


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


def test_graph_carries_the_calculators_bytes_and_the_tie(tiny) -> None:
    model, _, graph = tiny
    assert graph["sizing"]["precisions"] == memory.PRECISIONS
    assert graph["sizing"]["optimizer_state"] == memory.OPTIMIZER_STATE
    (tie,) = {m["id"]: m for m in graph["modules"]}["lm_head"]["tied"]
    assert model.lm_head.weight is model.tok_emb.weight and tie["owner"] == "tok_emb"
