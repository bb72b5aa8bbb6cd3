"""The tensor-parallel tiny GPT at t = 3 (3 heads, an odd width and vocabulary):
loss, logits, every gradient and the parameters after Adam steps equal one process's
in fp64; 2 all-reduces forward and 2 backward per layer, 8·b·s·h·(t−1)/t elements;
heads that t does not divide are one UsageError line through main()."""

from __future__ import annotations

import pytest
import torch.distributed as dist

from snippets.core.runtime import UsageError, launch
from snippets.models.tiny_gpt import GPT, GPTConfig
from snippets.parallel.tensor import tp_gpt

ODD = GPTConfig(vocab_size=63, block_size=5, n_layer=2, n_head=3, n_embd=24)


def checks() -> dict:
    out = {"odd": tp_gpt.train_against_dense(ODD, steps=2, b=3)}
    try:
        tp_gpt.main(steps=1)  # n_head = 4 on 3 ranks
    except UsageError as error:
        out["usage"] = str(error)
    model = tp_gpt.tensor_parallel_gpt(GPT(ODD))
    out["names"] = [n for n, _ in model.named_parameters()]
    out["tied"] = model.lm_head.weight is model.tok_emb.weight
    out["t"] = dist.get_world_size()
    return out


@pytest.fixture(scope="module")
def result() -> dict:
    return launch(checks, 3, "gloo", timeout_s=60)[0]


def test_training_equals_one_process(result) -> None:
    rows = result["odd"]["steps"]
    assert len(rows) == 2
    for r in rows:
        assert max(r["d_loss"], r["d_logits"], r["d_grads"], r["d_params"]) < 1e-12
    assert rows[1]["loss"] != rows[0]["loss"]  # the steps changed the weights


def test_communication_equals_the_formula(result) -> None:
    b, s, h, t = 3, ODD.block_size, ODD.n_embd, 3
    odd = result["odd"]
    assert odd["per_layer"] == 8 * b * s * h * (t - 1) / t == odd["formula"]
    assert [c["all_reduces"] for c in odd["comm"]] == [2, 2]
    ring = 2 * (t - 1) / t
    assert [c["sent"] for c in odd["comm"]] == [2 * ring * b * s * h] * 2
    assert odd["outside_blocks"]["embedding"] == ring * b * s * h  # one g
    assert odd["outside_blocks"]["cross_entropy"] == 3 * ring * b * s  # per token


def test_names_unchanged_and_head_still_tied(result) -> None:
    dense = [n for n, _ in GPT(ODD).named_parameters()]
    assert result["names"] == dense and result["tied"]


def test_heads_not_divisible_is_one_usage_line(result) -> None:
    message = result["usage"]
    assert message.startswith("n_head=4 is not divisible by the tensor-parallel size 3")
    assert "\n" not in message
