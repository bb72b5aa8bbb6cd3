"""tiny_gpt: the parameter formula against a count, and the slicing contract the
parallel modules rely on, each against the unsplit model."""

from __future__ import annotations

import copy
import dataclasses

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.testing import assert_close

from snippets.models.tiny_gpt import (
    GPT,
    GPTConfig,
    main,
    random_batch,
    reference_attention,
)

CONFIGS = [
    GPTConfig(),
    GPTConfig(bias=False),
    GPTConfig(tie_embeddings=False),
    GPTConfig(37, 7, 3, 3, 15, bias=False, tie_embeddings=False),  # odd everywhere
    GPTConfig(vocab_size=1, block_size=1, n_layer=0, n_head=1, n_embd=1),
    GPTConfig(vocab_size=50, block_size=9, n_layer=5, n_head=6, n_embd=6),  # d/H = 1
    GPTConfig(vocab_size=8192, block_size=256, n_layer=6, n_head=12, n_embd=768),
]


def batch(cfg: GPTConfig) -> tuple[torch.Tensor, torch.Tensor]:
    return random_batch(cfg, 3)


def test_random_batch_is_the_seeds_alone_and_spans_the_vocabulary() -> None:
    cfg = GPTConfig(vocab_size=5, block_size=7)
    torch.manual_seed(0)
    state = torch.get_rng_state()
    idx, targets = random_batch(cfg, 40)
    assert torch.equal(torch.get_rng_state(), state)  # the caller's stream is kept
    assert idx.shape == targets.shape == (40, 7) and idx.dtype == torch.int64
    for t in (idx, targets):  # 280 draws: every id of 0..V-1 turns up, none outside
        assert t.unique().tolist() == [0, 1, 2, 3, 4]
    assert not torch.equal(idx, targets)  # two draws, not one tensor twice
    torch.manual_seed(99)  # another caller state: the same batch
    again = random_batch(cfg, 40)
    assert torch.equal(again[0], idx) and torch.equal(again[1], targets)
    assert not torch.equal(random_batch(cfg, 40, seed=2)[0], idx)


def test_random_batch_steps_follow_one_stream() -> None:
    cfg = GPTConfig(vocab_size=11, block_size=3)
    steps = random_batch(cfg, 4, seed=3, steps=3)
    assert len(steps) == 3 and all(len(pair) == 2 for pair in steps)
    first = random_batch(cfg, 4, seed=3)
    assert all(torch.equal(a, b) for a, b in zip(steps[0], first))
    drawn = [t for pair in steps for t in pair]
    assert all(not torch.equal(drawn[i], drawn[j]) for i in range(6) for j in range(i))
    assert random_batch(cfg, 4, steps=0) == []


def test_random_batch_lands_on_the_device_with_the_same_ids() -> None:
    cfg = GPTConfig()
    here = random_batch(cfg, 2, device="meta")  # no data, but the place is honoured
    assert all(t.device.type == "meta" for t in here)
    if torch.cuda.is_available():
        on_gpu = random_batch(cfg, 2, device="cuda")
        assert all(
            torch.equal(a.cpu(), b) for a, b in zip(on_gpu, random_batch(cfg, 2))
        )


@pytest.mark.parametrize("cfg", CONFIGS, ids=str)
def test_num_params_formula_equals_the_count(cfg: GPTConfig) -> None:
    model = GPT(cfg)
    assert cfg.num_params() == sum(p.numel() for p in model.parameters())
    assert (model.lm_head.weight is model.tok_emb.weight) == cfg.tie_embeddings


def test_gpt2_small_has_its_published_size() -> None:
    # GPT-2 small: 124M with its 50257-token vocabulary, 1024 positions, tied head.
    gpt2 = GPTConfig(50257, 1024, 12, 12, 768)
    assert round(gpt2.num_params() / 1e6) == 124


def test_width_must_divide_into_heads() -> None:
    with pytest.raises(ValueError, match="multiple"):
        GPTConfig(n_head=3, n_embd=32)


def test_init_depends_only_on_the_seed() -> None:
    torch.manual_seed(123)
    state = torch.get_rng_state()
    a = GPT(GPTConfig(), seed=5)
    assert torch.equal(torch.get_rng_state(), state)  # the caller's stream is kept
    torch.manual_seed(999)
    b, c = GPT(GPTConfig(), seed=5), GPT(GPTConfig(), seed=6)
    for pa, pb, pc in zip(a.parameters(), b.parameters(), c.parameters()):
        assert torch.equal(pa, pb)
    assert not torch.equal(a.blocks[0].attn.q.weight, c.blocks[0].attn.q.weight)


@pytest.mark.parametrize("cfg", CONFIGS[:4], ids=str)
def test_forward_is_embed_blocks_head_and_its_loss_is_cross_entropy(cfg) -> None:
    model = GPT(cfg)
    idx, targets = batch(cfg)
    logits, loss = model(idx, targets)
    assert logits.shape == (3, cfg.block_size, cfg.vocab_size)
    ref = F.cross_entropy(logits.reshape(-1, cfg.vocab_size), targets.reshape(-1))
    assert_close(loss, ref)
    assert model(idx)[1] is None
    x = model.embed(idx)
    for block in model.blocks[:1]:  # a pipeline stage is a slice of the list
        x = block(x)
    for block in model.blocks[1:]:
        x = block(x)
    assert_close(model.head(x), logits)


def test_attention_is_causal_and_swappable() -> None:
    cfg = GPTConfig(n_layer=3)
    model = GPT(cfg).double()
    idx, _ = batch(cfg)
    logits, _ = model(idx)
    changed = idx.clone()
    changed[:, 9] = (changed[:, 9] + 1) % cfg.vocab_size
    later, _ = model(changed)
    assert_close(later[:, :9], logits[:, :9])  # nothing before position 9 sees it
    assert not torch.allclose(later[:, 9:], logits[:, 9:])
    for block in model.blocks:
        block.attn.attention = reference_attention  # the formula, written out
    assert_close(model(idx)[0], logits)
    for block in model.blocks:  # and the swap is really used: no mask, other logits
        block.attn.attention = F.scaled_dot_product_attention
    assert not torch.allclose(model(idx)[0][:, :-1], logits[:, :-1])


def test_positions_let_a_sequence_shard_embed_itself() -> None:
    cfg = GPTConfig()
    model = GPT(cfg)
    idx, _ = batch(cfg)
    parts = [
        model.embed(idx[:, pos], positions=pos)
        for pos in torch.arange(cfg.block_size).tensor_split(3)
    ]
    assert_close(torch.cat(parts, dim=1), model.embed(idx))


def _rows(linear: nn.Linear, rows: slice) -> nn.Linear:
    out = nn.Linear(linear.in_features, rows.stop - rows.start).double()
    out.weight.data, out.bias.data = linear.weight[rows], linear.bias[rows]
    return out


def _cols(linear: nn.Linear, cols: slice) -> nn.Linear:
    out = nn.Linear(cols.stop - cols.start, linear.out_features, bias=False).double()
    out.weight.data = linear.weight[:, cols]
    return out


@pytest.mark.parametrize("t", [1, 2, 3])
def test_column_split_heads_and_hidden_units_run_unchanged(t: int) -> None:
    # The tensor-parallel contract: q, k, v cut by heads and mlp.fc by hidden units
    # (rows), attn.proj and mlp.proj by the matching columns, run through the same
    # modules; the partial outputs sum to the dense ones (plus the bias, once).
    cfg = GPTConfig(n_head=3, n_embd=24)
    block = GPT(cfg).double().blocks[0]
    x = torch.randn(2, 5, cfg.n_embd, dtype=torch.float64)
    attn, mlp, hd = block.attn, block.mlp, cfg.n_embd // cfg.n_head
    attn_sum, mlp_sum = attn.proj.bias, mlp.proj.bias  # (d,): added once
    heads = torch.arange(cfg.n_head).tensor_split(t)
    hidden = torch.arange(4 * cfg.n_embd).tensor_split(t)
    for h, u in zip(heads, hidden):
        r, c = slice(int(h[0]) * hd, (int(h[-1]) + 1) * hd), slice(u[0], u[-1] + 1)
        part, piece = copy.deepcopy(attn), copy.deepcopy(mlp)
        part.q, part.k, part.v = (_rows(getattr(attn, n), r) for n in "qkv")
        part.proj, piece.fc, piece.proj = (
            _cols(attn.proj, r),
            _rows(mlp.fc, c),
            _cols(mlp.proj, c),
        )
        attn_sum, mlp_sum = attn_sum + part(x), mlp_sum + piece(x)
    assert_close(attn_sum, attn(x))
    assert_close(mlp_sum, mlp(x))


def test_main_checks_itself() -> None:
    out = main()
    assert [r["formula"] for r in out["tables"]["configs"]] == [
        r["counted"] for r in out["tables"]["configs"]
    ]
    assert dataclasses.asdict(GPTConfig())["n_embd"] == 32


def test_an_empty_shard_runs_and_gives_zero_gradients() -> None:
    # a data-parallel rank may get no sequences (B < p): shapes must still work out
    cfg = GPTConfig()
    model = GPT(cfg)
    idx = torch.zeros(0, cfg.block_size, dtype=torch.long)
    logits, _ = model(idx)
    assert logits.shape == (0, cfg.block_size, cfg.vocab_size)
    logits.sum().backward()
    assert all(torch.equal(p.grad, torch.zeros_like(p)) for p in model.parameters())
