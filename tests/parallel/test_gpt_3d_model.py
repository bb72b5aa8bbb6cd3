"""A rank's part of the 3D GPT, in one process (a mesh needs no group until tensor
parallel or a collective): the blocks each pipeline rank keeps partition the model
as hand-worked, the kept parameters are the dense ones, the tied weight stays tied,
a context-parallel rank embeds its zig-zag positions, and the batch shards
reassemble into the global batch."""

from __future__ import annotations

from collections import Counter
from types import SimpleNamespace

import pytest
import torch
import torch.nn as nn

from snippets.attention.zigzag_layout import zigzag_unshard
from snippets.models.tiny_gpt import GPT, random_batch
from snippets.parallel.gpt_3d import CFG
from snippets.parallel.gpt_3d_model import (
    DtypeOnly,
    rank_batch,
    rank_blocks,
    rank_model,
    rank_stages,
)


def fake_mesh(**sizes) -> SimpleNamespace:
    axes = {"dp": 1, "pp": 1, "cp": 1, "tp": 1, "dp_rank": 0, "pp_rank": 0}
    ranks = {"cp_rank": 0, "tp_rank": 0, "cp_group": None}
    return SimpleNamespace(**{**axes, **ranks, **sizes})


def test_stages_and_blocks_as_worked_by_hand() -> None:
    assert rank_stages(2, 2, 1) == [1, 3]  # chunk c of rank r is stage c·p + r
    assert [rank_blocks(4, 2, 2, r) for r in (0, 1)] == [[0, 2], [1, 3]]
    assert [rank_blocks(4, 2, 1, r) for r in (0, 1)] == [[0, 1], [2, 3]]
    assert [rank_blocks(5, 3, 1, r) for r in range(3)] == [[0, 1], [2, 3], [4]]
    for L, p, v in ((7, 3, 2), (6, 2, 3), (4, 4, 1)):  # a partition of the blocks
        every = sorted(i for r in range(p) for i in rank_blocks(L, p, v, r))
        assert every == list(range(L))


def test_each_pipeline_rank_keeps_its_stages_only() -> None:
    dense = dict(GPT(CFG).double().named_parameters())
    held = []
    for r in range(3):
        model = rank_model(CFG, fake_mesh(pp=3, pp_rank=r))
        names = dict(model.named_parameters())
        held += list(names)
        for name, p in names.items():  # the dense values, before any cut
            assert torch.equal(p, dense[name]), name
        kept = [i for i, b in enumerate(model.blocks) if not isinstance(b, nn.Identity)]
        assert kept == rank_blocks(CFG.n_layer, 3, 1, r)
        assert (model.pos_emb is not None) == (r == 0)
        assert (model.lm_head is not None) == (r == 2)
    twice = {"tok_emb.weight"}  # the tied weight: on the first and the last stage
    assert Counter(held) == {n: 1 + (n in twice) for n in dense}
    middle, last = (rank_model(CFG, fake_mesh(pp=3, pp_rank=r)) for r in (1, 2))
    assert isinstance(middle.tok_emb, DtypeOnly)
    assert middle.tok_emb.weight.dtype == torch.float64
    assert middle.tok_emb.weight.shape == (0, CFG.n_embd)
    assert last.lm_head.weight is last.tok_emb.weight  # tied: the executor sums both


@pytest.mark.parametrize("cp_rank", [0, 1])
def test_context_parallel_rank_embeds_its_own_positions(cp_rank: int) -> None:
    model = rank_model(CFG, fake_mesh(cp=2, cp_rank=cp_rank))
    dense = GPT(CFG).double()
    ids = torch.arange(CFG.block_size).remainder(CFG.vocab_size)[None]  # (1, N)
    full = dense.embed(ids)  # (1, N, d)
    shard, _ = rank_batch(ids, ids, fake_mesh(cp=2, cp_rank=cp_rank))  # (1, N/2)
    half = CFG.block_size // 4  # chunks r and 3 - r of 4
    rows = [*range(cp_rank * half, (cp_rank + 1) * half)]
    rows += [*range((3 - cp_rank) * half, (4 - cp_rank) * half)]
    torch.testing.assert_close(model.embed(shard), full[:, rows], rtol=0, atol=0)


def test_the_shards_make_up_the_global_batch() -> None:
    idx, targets = random_batch(CFG, 6, seed=0)  # (6, 16) each
    parts = {
        (d, c): rank_batch(idx, targets, fake_mesh(dp=3, dp_rank=d, cp=2, cp_rank=c))
        for d in range(3)
        for c in range(2)
    }
    for which, whole in enumerate((idx, targets)):
        rows = [
            zigzag_unshard([parts[d, c][which] for c in range(2)], dim=1)
            for d in range(3)
        ]
        assert torch.equal(torch.cat(rows), whole)
    assert parts[0, 0][0].shape == (2, 8)


def test_sequence_parallel_ranks_get_their_part_of_the_ids_only() -> None:
    idx, targets = random_batch(CFG, 4)
    for cp_rank in (0, 1):
        whole = rank_batch(idx, targets, fake_mesh(cp=2, cp_rank=cp_rank))
        parts = [
            rank_batch(idx, targets, fake_mesh(cp=2, cp_rank=cp_rank, tp=2, tp_rank=t))
            for t in (0, 1)
        ]
        assert torch.equal(torch.cat([ids for ids, _ in parts], dim=1), whole[0])
        assert all(torch.equal(tgt, whole[1]) for _, tgt in parts)  # whole: the loss
        assert parts[0][0].shape == (4, 4)  # (b, N/(cp·t))
        off = rank_batch(
            idx, targets, fake_mesh(cp=2, cp_rank=cp_rank, tp=2), False
        )  # tensor parallel only: every tp rank has the cp shard
        assert all(torch.equal(a, b) for a, b in zip(off, whole))
