"""Every schedule executed on 2 and on 3 ranks equals one process on the whole batch
(loss and every gradient, fp64, 1e-12), with uneven micro-batches and the tied
embedding split across the first and last stage; autograd's peak equals the plan's."""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist

from snippets.core.compare import max_difference
from snippets.core.runtime import UsageError, launch
from snippets.models.tiny_gpt import GPT, GPTConfig, random_batch
from snippets.parallel.pipeline.pipeline_executor import execute
from snippets.parallel.pipeline.pipeline_schedules import schedule
from snippets.parallel.pipeline.pipeline_validate import peak_in_flight

CFG = GPTConfig(vocab_size=32, block_size=8, n_layer=6, n_head=2, n_embd=16)
CASES = [("gpipe", 3, 1), ("1f1b", 4, 1), ("zb-h1", 5, 1), ("interleaved", 6, 2),
         ("interleaved", 6, 3)]  # fmt: skip


def runs() -> list[dict]:
    """Each case on this group; 7 rows, so micro-batches are uneven (3 → 3, 2, 2)."""
    p = dist.get_world_size()
    idx, targets = random_batch(CFG, 7, seed=2)
    reference = GPT(CFG).double()
    loss = reference(idx, targets)[1]
    loss.backward()
    ref = dict(reference.named_parameters())
    out = []
    for name, m, v in CASES:
        if p * v > CFG.n_layer or (v > 1 and m % p):
            continue
        model = GPT(CFG).double()
        run = execute(model, name, idx, targets, m, v, group=dist.group.WORLD)
        grads = {n: q.grad for n, q in model.named_parameters() if q.grad is not None}
        out.append({
            "case": (name, m, v),
            "error": max_difference(model, reference, grads=True),
            "tied": max_difference(grads["tok_emb.weight"], ref["tok_emb.weight"].grad)
            if "tok_emb.weight" in grads else None,
            "owned": sorted(grads),
            "loss": None if run.loss is None else abs(run.loss.item() - loss.item()),
            "peak": run.peak_in_flight,
            "stamps": run.stamps,
        })  # fmt: skip
    return out


@pytest.fixture(scope="module", params=[2, 3])
def ranks(request) -> tuple[int, list[list[dict]]]:
    return request.param, launch(runs, request.param, "gloo", timeout_s=60)


def test_loss_and_every_gradient_equal_one_process(ranks) -> None:
    p, per_rank = ranks
    every = sorted(n for n, _ in GPT(CFG).named_parameters())
    assert len(per_rank[0]) >= 4
    for i, row in enumerate(per_rank[0]):
        rows = [r[i] for r in per_rank]
        assert all(r["error"] < 1e-12 for r in rows), row["case"]
        assert rows[-1]["loss"] < 1e-12 and rows[0]["loss"] is None
        assert sorted({n for r in rows for n in r["owned"]}) == every
        # the tied weight: summed over the first and the last stage, on both
        assert rows[0]["tied"] < 1e-12 and rows[-1]["tied"] < 1e-12


def test_autograd_holds_what_the_plan_says(ranks) -> None:
    p, per_rank = ranks
    for i, row in enumerate(per_rank[0]):
        name, m, v = row["case"]
        assert [r[i]["peak"] for r in per_rank] == peak_in_flight(
            schedule(name, p, m, v)
        )


def test_stamps_follow_the_plan(ranks) -> None:
    p, per_rank = ranks
    for i, row in enumerate(per_rank[0]):
        name, m, v = row["case"]
        for rank, plan in enumerate(schedule(name, p, m, v)):
            stamps = per_rank[rank][i]["stamps"]
            assert [(s["kind"], s["microbatch"], s["chunk"]) for s in stamps] == [
                (a.kind, a.microbatch, a.chunk) for a in plan
            ]
            ends = [0] + [s["end"] for s in stamps]
            for before, s in zip(ends, stamps):
                assert before <= s["wait"] <= s["start"] <= s["end"]


def test_bad_sizes_are_usage_errors() -> None:
    with pytest.raises(UsageError, match="at least 8 blocks"):
        launch(execute, 1, "gloo", 30, args=(GPT(CFG), "interleaved", *too_few()))
    with pytest.raises(UsageError, match="micro-batches need 1..2"):
        launch(execute, 1, "gloo", 30, args=(GPT(CFG), "gpipe", *too_many()))


def too_few():
    idx = torch.zeros(8, 8, dtype=torch.long)
    return idx, idx, 8, 8  # 1 rank × 8 chunks > 6 blocks


def too_many():
    idx = torch.zeros(2, 8, dtype=torch.long)
    return idx, idx, 3  # 3 micro-batches of 2 rows
