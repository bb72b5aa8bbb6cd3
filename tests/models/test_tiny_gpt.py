"""tiny_gpt: the parameter formula against a count, and the slicing contract the
parallel modules rely on, each against the unsplit model. With experts: one expert
is the dense MLP, the loss adds α times Switch's auxiliary loss of each sequence
alone (``moe.route`` on one row), shards of a sequence add up to it, bad settings
are refused."""

from __future__ import annotations

import copy
import dataclasses

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.testing import assert_close

from snippets.models.moe import MoE, route
from snippets.models.tiny_gpt import (
    GPT,
    MLP,
    GPTConfig,
    main,
    random_batch,
    reference_attention,
    sequence_balance_loss,
)

CONFIGS = [
    GPTConfig(),
    GPTConfig(bias=False),
    GPTConfig(tie_embeddings=False),
    GPTConfig(37, 7, 3, 3, 15, bias=False, tie_embeddings=False),  # odd everywhere
    GPTConfig(vocab_size=1, block_size=1, n_layer=0, n_head=1, n_embd=1),
    GPTConfig(vocab_size=50, block_size=9, n_layer=5, n_head=6, n_embd=6),  # d/H = 1
    GPTConfig(vocab_size=8192, block_size=256, n_layer=6, n_head=12, n_embd=768),
    GPTConfig(num_experts=4, top_k=2),
    GPTConfig(37, 7, 3, 3, 15, bias=False, tie_embeddings=False, num_experts=3),
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
    loss, forward = out["excerpts"]["summary"]  # the note's two lines
    assert loss.startswith("loss at init") and forward.endswith("= forward ✓")


def test_an_empty_shard_runs_and_gives_zero_gradients() -> None:
    # a data-parallel rank may get no sequences (B < p): shapes must still work out
    cfg = GPTConfig()
    model = GPT(cfg)
    idx = torch.zeros(0, cfg.block_size, dtype=torch.long)
    logits, _ = model(idx)
    assert logits.shape == (0, cfg.block_size, cfg.vocab_size)
    logits.sum().backward()
    assert all(torch.equal(p.grad, torch.zeros_like(p)) for p in model.parameters())


def test_the_default_is_dense_and_experts_are_an_option() -> None:
    assert all(isinstance(b.mlp, MLP) for b in GPT(GPTConfig()).blocks)
    moe = GPT(GPTConfig(num_experts=3, top_k=2, capacity_factor=1.5)).blocks[1].mlp
    assert isinstance(moe, MoE) and len(moe.experts) == 3
    assert (moe.top_k, moe.capacity_factor, moe.experts[0].fc.out_features) == (
        2,
        1.5,
        4 * 32,
    )


def test_one_expert_is_the_dense_mlp_and_its_balance_loss_is_1() -> None:
    # E = 1: the router's softmax is 1, so y = expert(x); f = P = 1, aux = 1 a block
    dense_cfg, moe_cfg = GPTConfig(n_layer=3), GPTConfig(n_layer=3, num_experts=1)
    dense, moe = GPT(dense_cfg).double(), GPT(moe_cfg).double()
    with torch.no_grad():
        for name, p in dense.named_parameters():
            moe.get_parameter(name.replace("mlp.", "mlp.experts.0.")).copy_(p)
    idx, targets = batch(dense_cfg)
    logits, loss = dense(idx, targets)
    moe_logits, moe_loss = moe(idx, targets)
    assert_close(moe_logits, logits)
    assert_close(moe_loss, loss + moe_cfg.aux_loss_coef * 3)


def test_the_loss_adds_switch_aux_loss_per_sequence() -> None:
    cfg = GPTConfig(n_layer=2, num_experts=4, top_k=2, aux_loss_coef=0.3)
    model = GPT(cfg, seed=4).double()
    idx, targets = batch(cfg)
    logits, loss = model(idx, targets)
    x, aux = model.embed(idx), []
    for block in model.blocks:
        x = x + block.attn(block.ln1(x))
        h = block.ln2(x)
        rows = [route(block.mlp.router, row, 2, None).aux_loss for row in h]
        assert_close(block.aux_loss, torch.stack(rows))  # (B,): one per sequence
        aux.append(torch.stack(rows).mean())
        x = x + block.mlp(h)
    ce = F.cross_entropy(logits.flatten(0, 1), targets.flatten())
    assert_close(loss, ce + 0.3 * sum(aux))
    first = model.blocks[0]  # the batch at once would give another number
    h = first.ln2(model.embed(idx) + first.attn(first.ln1(model.embed(idx))))
    whole = route(first.mlp.router, h.flatten(0, 1), 2, None).aux_loss
    assert not torch.isclose(whole, first.aux_loss.mean())
    loss.backward()
    without = GPT(dataclasses.replace(cfg, aux_loss_coef=0.0), seed=4).double()
    without(idx, targets)[1].backward()  # the router's gradient includes the aux term
    router = [m.blocks[1].mlp.router.weight.grad for m in (model, without)]
    assert not torch.allclose(*router)


def test_shards_of_a_sequence_add_up_to_its_balance_loss() -> None:
    g = torch.Generator().manual_seed(0)
    router = nn.Linear(8, 5, bias=False).double()
    h = torch.randn(3, 12, 8, dtype=torch.float64, generator=g)  # (B, N, d)
    whole = sequence_balance_loss(router, h, 2)
    picks = torch.softmax(router(h), -1).topk(2, dim=-1).indices  # (B, N, k)
    counts = torch.stack([torch.bincount(r.flatten(), minlength=5) for r in picks])
    shards = [h[:, :5], h[:, 5:9], h[:, 9:]]  # uneven, as no real split is
    parts = [
        sequence_balance_loss(router, s, 2, tokens=12, count_all=lambda c: counts)
        for s in shards
    ]
    assert_close(sum(parts), whole)
    alone = sequence_balance_loss(router, shards[0], 2)  # its own counts: not a part
    assert not torch.allclose(alone, parts[0])


@pytest.mark.parametrize(
    "kw, words",
    [({"num_experts": 4, "top_k": 0}, "top_k=0 must be 1 to num_experts=4"),
     ({"num_experts": 4, "top_k": 5}, "top_k=5 must be 1 to num_experts=4"),
     ({"num_experts": -1}, "num_experts=-1"),
     ({"num_experts": 4, "capacity_factor": -1.0}, "capacity_factor=-1.0 must be"),
     ({"num_experts": 4, "capacity_factor": 0.0}, "capacity_factor=0.0 must be")],
)  # fmt: skip
def test_bad_expert_settings_are_refused(kw, words) -> None:
    with pytest.raises(ValueError, match=words):
        GPTConfig(**kw)


def test_init_with_experts_depends_only_on_the_seed() -> None:
    cfg = GPTConfig(num_experts=3)
    torch.manual_seed(1)
    state = torch.get_rng_state()
    a = GPT(cfg, seed=2)
    assert torch.equal(torch.get_rng_state(), state)
    torch.manual_seed(7)
    b = GPT(cfg, seed=2)
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))
    experts = a.blocks[0].mlp.experts  # GPT-2's init: N(0, 0.02), proj scaled by 1/√2L
    assert not torch.equal(experts[0].fc.weight, experts[1].fc.weight)
    assert experts[0].proj.weight.std() < experts[0].fc.weight.std()
