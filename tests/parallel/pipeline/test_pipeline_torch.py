"""Our executor against torch.distributed.pipelining on gloo: for each of our plans,
torch's schedule on the same stages and micro-batches gives the same loss and the
same gradient of every parameter (fp64, 1e-12), the tied embedding included; and
the same model run whole in one process agrees with both."""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist

from snippets.core.compare import max_difference
from snippets.core.runtime import UsageError, launch
from snippets.models.tiny_gpt import GPT, GPTConfig, random_batch
from snippets.parallel.pipeline.pipeline_executor import execute
from snippets.parallel.pipeline.pipeline_torch import TORCH_SCHEDULES, run_torch

CFG = GPTConfig(vocab_size=32, block_size=8, n_layer=4, n_head=2, n_embd=16)
CASES = [("gpipe", 8, 1), ("1f1b", 4, 1), ("interleaved", 4, 2), ("zb-h1", 4, 1)]


def grads(model: GPT) -> dict[str, torch.Tensor]:
    return {n: q.grad for n, q in model.named_parameters() if q.grad is not None}


def both() -> dict:
    """Every case, ours then torch's, from the same fresh weights; 8 rows."""
    idx, targets = random_batch(CFG, 8, seed=3)
    whole = GPT(CFG).double()
    whole(idx, targets)[1].backward()
    out: dict = {}
    for name, m, v in CASES:
        ours, theirs = GPT(CFG).double(), GPT(CFG).double()
        run = execute(ours, name, idx, targets, m, v)
        loss = run_torch(theirs, name, idx, targets, m, v)
        a, b, w = grads(ours), grads(theirs), grads(whole)
        out[name] = {
            "names": (sorted(a), sorted(b)),
            "vs_torch": max_difference(a, b),
            "vs_whole": max_difference(b, w),
            "losses": None if loss is None else (run.loss.item(), loss.item()),
        }
    for key, m in (("m<p", 1), ("uneven", 3)):  # ours runs both; torch does not
        try:
            run_torch(GPT(CFG).double(), "1f1b", idx, targets, m)
            out[key] = None
        except UsageError as e:
            out[key] = str(e)
    out["whole_loss"] = whole(idx, targets)[1].item()
    out["rank"] = dist.get_rank()
    return out


@pytest.fixture(scope="module")
def per_rank() -> list[dict]:
    return launch(both, 2, "gloo", timeout_s=60)


@pytest.mark.parametrize("name", [c[0] for c in CASES])
def test_torch_pipelining_computes_what_our_executor_does(per_rank, name) -> None:
    for r in per_rank:
        row = r[name]
        ours, theirs = row["names"]
        assert ours == theirs and ours, name  # the same parameters got gradients
        assert row["vs_torch"] < 1e-12 and row["vs_whole"] < 1e-12, (name, row)
    first, last = per_rank[0][name], per_rank[-1][name]
    assert first["losses"] is None
    ours, theirs = last["losses"]
    assert (
        abs(ours - theirs) < 1e-12 and abs(theirs - per_rank[-1]["whole_loss"]) < 1e-12
    )
    # every parameter has a gradient on some rank; the tied one on both ends
    every = {n for n, _ in GPT(CFG).named_parameters()}
    assert set(first["names"][0]) | set(last["names"][0]) == every
    assert "tok_emb.weight" in set(first["names"][0]) & set(last["names"][0])


def test_every_plan_has_a_torch_counterpart() -> None:
    assert sorted(TORCH_SCHEDULES) == sorted(c[0] for c in CASES)


def test_what_torch_cannot_run_is_one_clear_error(per_rank) -> None:
    for r in per_rank:
        assert "Schedule1F1B needs m >= p=2, got m=1" in r["m<p"]
        assert "equal micro-batches: m=3 must divide the 8 rows" in r["uneven"]
