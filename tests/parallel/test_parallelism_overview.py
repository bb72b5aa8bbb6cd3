"""parallelism_overview: every split of the shared GPT must compute what the unsplit
model computes, on any number of ranks, and the recorded pipeline schedule must have
GPipe's bubble."""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction

import pytest
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from conftest import refused
from torch.testing import assert_close

from snippets.core.cli import snippet_options
from snippets.core.runtime import launch
from snippets.models.tiny_gpt import GPT, GPTConfig
from snippets.parallel import layer_split as ls
from snippets.parallel import parallelism_overview as ov
from snippets.parallel import weight_split as ws
from snippets.parallel.batch_split import batch_split_step
from snippets.parallel.tensor import tensor_parallel

# (model, batch, micro-batches): the defaults main() uses (L raised to p when p > 6),
# and odd sizes with tied embeddings and no biases; on 5 ranks two shards are empty.
CASES = [
    (ov.MODEL, ov.B, ov.M),
    (GPTConfig(11, 5, 7, n_head=5, n_embd=15, bias=False), 3, 2),
]


def oracle(cfg: GPTConfig, B: int) -> tuple[GPT, torch.Tensor, torch.Tensor]:
    """Written the ordinary way: whole model, whole batch, mean cross-entropy."""
    model = GPT(cfg)
    idx, targets = ov.make_batch(cfg, B)
    logits, _ = model(idx)
    loss = F.cross_entropy(logits.reshape(-1, cfg.vocab_size), targets.reshape(-1))
    loss.backward()
    return model, logits.detach(), loss.detach()


def rank_checks() -> dict:
    """Every split on this rank against the unsplit model; returns what the parent
    checks."""
    rank, p = dist.get_rank(), dist.get_world_size()
    found = {}
    for k, (cfg, B, m) in enumerate(CASES):
        cfg = replace(cfg, n_layer=max(cfg.n_layer, p))
        model, logits, loss = oracle(cfg, B)
        idx, targets = ov.make_batch(cfg, B)

        dp = GPT(cfg)
        assert_close(batch_split_step(dp, idx, targets), loss)
        for mine, ref in zip(dp.parameters(), model.parameters()):
            assert_close(mine.grad, ref.grad)

        with torch.no_grad():
            y_mp = ls.layer_split_forward(model, idx)
            y_pp, schedule = ls.gpipe_forward(model, idx, m)
        if rank == p - 1:
            assert_close(y_mp, logits)
            assert_close(y_pp, logits)
        else:
            assert y_mp is None and y_pp is None

        tp = GPT(cfg)
        tp.blocks = nn.ModuleList(ws.weight_split_block(b) for b in tp.blocks)
        tp_logits, _ = tp(idx)
        tp_loss = F.cross_entropy(tp_logits.flatten(0, 1), targets.flatten())
        tp_loss.backward()
        assert_close(tp_logits.detach(), logits)
        # The embedding's gradient is right only because f sums every rank's part.
        assert_close(tp.tok_emb.weight.grad, model.tok_emb.weight.grad)
        pieces: list = [None] * p  # every rank's slices, put together: the full grads
        dist.all_gather_object(
            pieces,
            [
                (b.attn.inner.q.weight.grad, b.attn.inner.proj.weight.grad,
                 b.mlp.inner.fc.weight.grad, b.mlp.inner.proj.weight.grad)
                for b in tp.blocks
            ],
        )  # fmt: skip
        for i, ref in enumerate(model.blocks):
            for j, (dense, dim) in enumerate(
                [
                    (ref.attn.q, 0),
                    (ref.attn.proj, 1),
                    (ref.mlp.fc, 0),
                    (ref.mlp.proj, 1),
                ]
            ):
                got = torch.cat([pc[i][j] for pc in pieces], dim=dim)
                assert_close(got, dense.weight.grad)
            assert_close(tp.blocks[i].ln1.weight.grad, ref.ln1.weight.grad)

        f_op = tensor_parallel.CopyToTensorParallel
        backward = f_op.backward  # without f's all-reduce: wrong
        f_op.backward = staticmethod(lambda ctx, grad: (grad, None, None, None))
        try:
            tp.zero_grad()
            F.cross_entropy(tp(idx)[0].flatten(0, 1), targets.flatten()).backward()
        finally:
            f_op.backward = backward
        found[k] = {
            "blocks": list(ls.part(cfg.n_layer, p, rank, "blocks")),
            "schedule": schedule,
            "m": m,
            "L": cfg.n_layer,
            "f_matters": not torch.allclose(
                tp.tok_emb.weight.grad, model.tok_emb.weight.grad
            ),
        }
    found["main"] = ov.main()
    return found


@pytest.mark.parametrize("p", [1, 2, 3, 5])
def test_every_split_matches_the_unsplit_model(p: int) -> None:
    ranks = launch(rank_checks, p, backend="gloo", timeout_s=120)
    for k in range(len(CASES)):
        per_rank = [r[k] for r in ranks]
        L, m = per_rank[0]["L"], per_rank[0]["m"]
        held = [r["blocks"] for r in per_rank]
        assert sum(held, []) == list(range(L))  # contiguous, all, once
        assert max(map(len, held)) - min(map(len, held)) <= 1
        for rank, r in enumerate(per_rank):  # GPipe: stage s runs j at step s + j
            assert r["schedule"] == [(j, rank + j) for j in range(m)]
        schedules = [r["schedule"] for r in per_rank]
        assert ls.bubble_fraction(schedules) == Fraction(p - 1, m + p - 1)
        assert all(r["f_matters"] for r in per_rank) == (p > 1)
    result = ranks[0]["main"]
    assert result["world_size"] == p
    assert result["bubble"] == (p - 1) / (ov.M + p - 1)
    tables = result["tables"]
    for name in ("data", "model", "pipeline", "tensor"):
        assert [row["rank"] for row in tables[name]] == list(range(p))
        diffs = [row["max abs diff"] for row in tables[name]]
        assert all(x < 1e-5 for x in diffs if isinstance(x, float))
    cfg = replace(ov.MODEL, n_layer=max(ov.MODEL.n_layer, p))
    total, d = cfg.num_params(), cfg.n_embd
    assert tables["data"][0]["params"] == total
    assert sum(row["params"] for row in tables["model"]) == total  # untied: a partition
    replicated = total - cfg.n_layer * (12 * d * d + 7 * d)  # norms, out-biases, ends
    assert (
        sum(row["params"] for row in tables["tensor"]) == total + (p - 1) * replicated
    )
    grid = tables["schedule"]  # from the recorded schedule: stage s ran j at s + j
    assert [sum(c != "·" for k, c in row.items() if k != "stage") for row in grid] == [
        ov.M
    ] * p
    assert all(grid[s][f"t={s + j}"] == f"F{j}" for s in range(p) for j in range(ov.M))


@pytest.mark.parametrize("p, m", [(1, 1), (2, 1), (4, 4), (4, 8), (5, 3), (8, 32)])
def test_bubble_of_a_gpipe_and_a_sequential_schedule(p: int, m: int) -> None:
    gpipe = [[(j, s + j) for j in range(m)] for s in range(p)]
    assert (
        ls.bubble_fraction(gpipe) == ls.gpipe_bubble(p, m) == Fraction(p - 1, m + p - 1)
    )
    one_at_a_time = [[(j, s * m + j) for j in range(m)] for s in range(p)]
    assert ls.bubble_fraction(one_at_a_time) == Fraction(p - 1, p)  # naive split


@pytest.mark.parametrize("n, parts", [(10, 4), (7, 3), (32, 5), (6, 6), (1, 1)])
def test_split_sizes_agree_with_tensor_split(n: int, parts: int) -> None:
    expected = [len(c) for c in torch.arange(n).tensor_split(parts)]
    assert ls.split_sizes(n, parts, "x") == expected
    assert [i for r in range(parts) for i in ls.part(n, parts, r, "x")] == list(
        range(n)
    )


@pytest.mark.parametrize("n, parts", [(3, 5), (4, 0)])
def test_split_sizes_rejects_empty_parts(n: int, parts: int) -> None:
    with pytest.raises(ValueError, match="cannot split"):
        ls.split_sizes(n, parts, "blocks")


@pytest.mark.parametrize(
    "argv", [["--micro-batches", "0"], ["--batch", "-3"], ["--layers", "two"]]
)
def test_bad_option_is_one_line_and_exit_2(
    argv: list[str], capfd: pytest.CaptureFixture
) -> None:
    def parse(options: list[str]) -> dict:  # the parser `snippets run` uses
        prog = "python -m snippets run parallelism_overview"
        return snippet_options(ov, options, prog)

    assert argv[0] in refused(argv, capfd, entry=parse)
    good = snippet_options(ov, ["--micro-batches", "8"], "p")
    assert good == {"micro_batches": 8, "batch": ov.B, "layers": None}


def test_more_micro_batches_than_sequences_is_one_line_and_exit_2(capfd) -> None:
    argv = ["run", "parallelism_overview", "-n", "1"]
    line = refused([*argv, "--batch", "3", "--micro-batches", "4"], capfd)
    assert "cannot split 3 sequences into 4" in line
