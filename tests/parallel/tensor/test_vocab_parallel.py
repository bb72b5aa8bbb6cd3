"""The vocab-parallel embedding and cross-entropy equal F.embedding and
F.cross_entropy (values and gradients, fp64), with large logits that would overflow
an unshifted softmax; a vocabulary t does not divide is one UsageError line."""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

from snippets.core.runtime import UsageError, launch
from snippets.parallel.tensor.tensor_parallel import CommLog, own_block
from snippets.parallel.tensor.vocab_parallel import (
    VocabParallelEmbedding,
    vocab_parallel_cross_entropy,
)

F64 = torch.float64


def checks() -> dict:
    gen = torch.Generator().manual_seed(0)  # the same tensors on every rank
    emb = nn.Embedding(10, 4).to(F64)
    idx = torch.randint(10, (3, 5), generator=gen)
    ours = VocabParallelEmbedding.from_dense(emb)
    w = torch.randn(3, 5, 4, dtype=F64, generator=gen)
    (emb(idx) * w).sum().backward()
    got = ours(idx)
    (got * w).sum().backward()
    logits = 300 * torch.randn(3, 5, 10, dtype=F64, generator=gen)  # e^300 overflows
    targets = torch.randint(10, (3, 5), generator=gen)
    full = logits.clone().requires_grad_()
    want = F.cross_entropy(full.flatten(0, 1), targets.flatten())
    want.backward()
    mine = own_block(logits).clone().requires_grad_()
    log = CommLog()
    loss = vocab_parallel_cross_entropy(mine, targets, None, log)
    loss.backward()
    out = {
        "embedding": (got - emb(idx)).abs().max().item(),
        "embedding_grad": (ours.weight.grad - own_block(emb.weight.grad, None, 0))
        .abs()
        .max()
        .item(),
        "loss": abs(loss.item() - want.item()),
        "loss_grad": (mine.grad - own_block(full.grad)).abs().max().item(),
        "finite": bool(loss.isfinite()),
        "ce_calls": [(c[0], c[3]) for c in log.calls],
        "t": dist.get_world_size(),
    }
    try:
        VocabParallelEmbedding.from_dense(nn.Embedding(63, 4))
    except UsageError as error:
        out["usage"] = str(error)
    return out


@pytest.fixture(scope="module")
def result() -> dict:
    return launch(checks, 2, "gloo", timeout_s=60)[0]


def test_embedding_equals_the_dense_lookup(result) -> None:
    assert result["embedding"] < 1e-12 and result["embedding_grad"] < 1e-12


def test_cross_entropy_equals_torch_without_gathering_the_vocabulary(result) -> None:
    assert result["finite"] and result["loss"] < 1e-12 and result["loss_grad"] < 1e-12
    assert result["ce_calls"] == [("all_reduce", 15)] * 3  # max, Σ exp, target: B·N


def test_vocabulary_not_divisible_is_one_usage_line(result) -> None:
    assert result["usage"].startswith("vocab_size=63 is not divisible by")
    assert "\n" not in result["usage"]
