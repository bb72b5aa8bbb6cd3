"""Context parallel training of the tiny GPT on 3 gloo ranks, one launch: cp = 3 on
the whole world (the snippet's main, and an odd config: vocabulary 37, width 40, one
head, b = 3) and cp = 2 on the sub-group {1, 2} (untied head, no biases, chunks of 3
tokens). Loss, logits and every gradient equal one process on the whole sequence in
fp64 to 1e-12, the parameters after Adam to 1e-10; both deliberate mistakes are
caught; the ring's sends per layer equal the formula; a sequence that 2·cp does not
divide is one UsageError line on every rank."""

from __future__ import annotations

import pytest
import torch.distributed as dist

from snippets.core.runtime import UsageError, launch
from snippets.models.tiny_gpt import GPTConfig
from snippets.parallel.context import context_parallel
from snippets.parallel.context.context_parallel_gpt import ring_elements

ODD = GPTConfig(vocab_size=37, block_size=12, n_layer=2, n_head=1, n_embd=40)
UNTIED = GPTConfig(
    vocab_size=37,
    block_size=12,
    n_layer=1,
    n_head=1,
    n_embd=32,
    bias=False,
    tie_embeddings=False,
)


def checks() -> dict:
    out = {"main": context_parallel.main(steps=1)}
    out["odd"] = context_parallel.train_against_single(ODD, steps=2, b=3)
    pair = dist.new_group([1, 2])  # every rank creates it; ranks 1, 2 use it
    if dist.get_rank() in (1, 2):
        out["pair"] = context_parallel.train_against_single(UNTIED, 2, pair, b=1)
    try:
        context_parallel.train_against_single(GPTConfig(block_size=8, n_embd=64), 1)
    except UsageError as error:
        out["usage"] = str(error)
    return out


@pytest.fixture(scope="module")
def results() -> list[dict]:
    return launch(checks, 3, "gloo", timeout_s=120)


def runs(results):
    yield results[0]["odd"], ODD, 3
    yield results[1]["pair"], UNTIED, 1


def test_training_equals_one_process(results) -> None:
    for run, _, _ in runs(results):
        assert len(run["steps"]) == 2
        for r in run["steps"]:
            assert max(r["d_loss"], r["d_logits"], r["d_grads"]) < 1e-12
            assert r["d_params"] < 1e-10
        assert run["steps"][1]["loss"] != run["steps"][0]["loss"]  # Adam moved
    assert results[0]["main"]["provenance"]["world_size"] == 3
    assert results[0]["odd"]["cp"] == 3 and results[1]["pair"]["cp"] == 2
    assert results[0]["main"]["tables"]["steps"][0]["d_grads"] < 1e-12


def test_deliberate_mistakes_are_caught(results) -> None:
    for run, _, _ in runs(results):
        assert min(run["mistakes"].values()) > 1e-3


def test_ring_sends_equal_the_formula(results) -> None:
    for run, cfg, b in runs(results):
        cp, s, h = run["cp"], cfg.block_size, cfg.n_embd
        kv = 2 * b * (s // cp) * h  # K and V of one shard
        assert len(run["comm"]) == 2 * cfg.n_layer
        for c in run["comm"]:
            hops = cp - 1 if c["phase"] == "forward" else 2 * cp - 1
            assert c["sends"] == hops and c["elements"] == hops * kv
            assert c["formula"] == ring_elements(cp, b, s, h, c["phase"])
            assert c["bytes"] == 8 * c["elements"]


def test_indivisible_sequence_is_one_line(results) -> None:
    for r in results:
        assert r["usage"].startswith("sequence length 8 is not divisible by 2·cp = 6")
        assert "\n" not in r["usage"]
