"""The pieces of context parallel, without a ring: the zig-zag shard of tokens and
positions against a hand-worked layout, the send formula against hand counts, the
bad inputs as one UsageError line, and cp = 1 (one rank: ring attention is plain
attention, nothing is sent) against the dense GPT."""

from __future__ import annotations

import copy

import pytest
import torch

from snippets.core.runtime import UsageError, launch
from snippets.models.tiny_gpt import GPT, GPTConfig, random_batch
from snippets.parallel.context.context_parallel_gpt import (
    RingLog,
    context_parallel_gpt,
    cp_loss,
    ring_elements,
    shard_batch,
)


def test_shard_keeps_chunks_r_and_2cp_minus_1_minus_r() -> None:
    idx = 100 + torch.arange(8).repeat(2, 1)  # (B=2, s=8), token = 100 + position
    targets = idx + 50
    by_hand = {0: [0, 1, 6, 7], 1: [2, 3, 4, 5]}  # 4 chunks of 2: {0, 3} and {1, 2}
    for rank, positions in by_hand.items():
        mine, their_targets, where = shard_batch(idx, targets, rank, 2)
        assert where.tolist() == positions
        assert mine.tolist() == [[100 + p for p in positions]] * 2
        assert their_targets.tolist() == [[150 + p for p in positions]] * 2
    assert shard_batch(idx, targets, 0, 1)[2].tolist() == list(range(8))


def test_send_formula_by_hand() -> None:
    # cp = 2, b = 1, s = 4, h = 32: K, V of a shard are 2 · 1 · 2 · 32 = 128 values
    assert ring_elements(2, 1, 4, 32, "forward") == 128  # one hop
    assert ring_elements(2, 1, 4, 32, "backward") == 384  # K, V once; dK, dV twice
    assert ring_elements(3, 2, 12, 40, "backward") == 5 * 640
    assert ring_elements(1, 2, 12, 40, "forward") == 0
    assert ring_elements(1, 2, 12, 40, "backward") == 0


def test_bad_inputs_are_one_line() -> None:
    idx = torch.zeros(1, 10, dtype=torch.long)
    with pytest.raises(
        UsageError, match=r"^sequence length 10 is not divisible by 2·cp"
    ):
        shard_batch(idx, idx, 0, 2)
    with pytest.raises(UsageError, match="head dim n_embd/n_head = 16") as error:
        context_parallel_gpt(GPT(GPTConfig()))  # d = 32, H = 2
    assert "\n" not in str(error.value)


def one_rank() -> dict:
    cfg = GPTConfig(block_size=8, n_embd=64, n_head=2, tie_embeddings=False)
    dense, log = GPT(cfg).double(), RingLog()
    model = context_parallel_gpt(copy.deepcopy(dense), log=log)
    idx, targets = random_batch(cfg, 3, seed=2)  # (3, 8) each
    logits, loss = dense(idx, targets)
    loss.backward()
    with log:
        mine, loss_1 = cp_loss(model, *shard_batch(idx, targets, 0, 1))
        loss_1.backward()
    grads = dict(dense.named_parameters())
    return {
        "d_logits": (mine - logits).abs().max().item(),
        "d_grads": max(
            (p.grad - grads[n].grad).abs().max().item()
            for n, p in model.named_parameters()
        ),
        "sends": len(log.sends),
        "where": log.where,
        "totals": log.totals("blocks.0", "forward"),
    }


def test_one_rank_is_the_dense_gpt() -> None:
    r = launch(one_rank, 1, "gloo", timeout_s=60)[0]
    assert r["d_logits"] < 1e-12 and r["d_grads"] < 1e-12
    assert r["sends"] == 0
    assert r["totals"] == {"sends": 0, "elements": 0, "bytes": 0}
    assert r["where"] == ("blocks.0", "backward")  # backward reaches block 0 last
