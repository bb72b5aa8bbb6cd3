"""Batch split: shard losses sum to the full-batch mean; all-reduced grads equal the
unsplit model's gradient."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from snippets.core.runtime import launch
from snippets.models.tiny_gpt import GPT, GPTConfig
from snippets.parallel.batch_split import batch_split_step, token_loss

CFG = GPTConfig(vocab_size=16, block_size=8, n_layer=1, n_head=2, n_embd=16)


def test_uniform_logits_give_log_v() -> None:
    logits = torch.zeros(2, 3, 7)  # every token: uniform over V = 7
    targets = torch.randint(7, (2, 3))
    assert math.isclose(
        token_loss(logits, targets, 6).item(), math.log(7), rel_tol=1e-6
    )


def test_uneven_and_empty_shards_sum_to_the_mean() -> None:
    g = torch.Generator().manual_seed(0)
    logits, targets = torch.randn(3, 5, 11, generator=g), torch.randint(11, (3, 5))
    full = F.cross_entropy(logits.reshape(-1, 11), targets.reshape(-1))
    shards = zip(logits.tensor_split(5), targets.tensor_split(5))  # 2 empty
    total = sum(token_loss(lg, t, targets.numel()) for lg, t in shards)
    torch.testing.assert_close(total, full)


def split_vs_whole() -> dict:
    torch.manual_seed(0)
    model = GPT(CFG)
    g = torch.Generator().manual_seed(1)
    idx = torch.randint(16, (3, 8), generator=g)  # B = 3 on 2 ranks: 2 + 1
    targets = torch.randint(16, (3, 8), generator=g)
    loss = batch_split_step(model, idx, targets)
    grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    logits, _ = model(idx)
    ref = F.cross_entropy(logits.reshape(-1, 16), targets.reshape(-1))
    ref.backward()
    diff = max(
        (a - p.grad).abs().max().item() for a, p in zip(grads, model.parameters())
    )
    return {"loss": loss.item(), "ref": ref.item(), "grad_diff": diff}


def test_two_ranks_match_the_unsplit_model() -> None:
    for r in launch(split_vs_whole, 2, backend="gloo", timeout_s=30):
        assert math.isclose(r["loss"], r["ref"], rel_tol=1e-5)
        assert r["grad_diff"] < 1e-5
