"""parallelism: every split must compute what the unsplit model computes, on any number of
ranks, and the recorded pipeline schedule must have GPipe's bubble."""

from __future__ import annotations

from fractions import Fraction

import pytest
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.testing import assert_close

from snippets.core.cli import snippet_options
from snippets.core.runtime import launch
from snippets.parallel import parallelism as par

CONFIGS = [
    par.Config(),  # the defaults main() uses (with L raised to p when p > 6)
    par.Config(
        d=5, h=13, L=7, B=3, m=2, seed=3
    ),  # odd sizes; on 5 ranks two data shards are empty
]


def unsplit(cfg: par.Config) -> tuple[nn.Sequential, torch.Tensor, torch.Tensor]:
    """The oracle, written the ordinary way: whole model, whole batch, mean squared error."""
    model = par.build_model(cfg)
    x, target = par.make_batch(cfg)
    x = x.clone().requires_grad_()
    y = model(x)  # (B, d)
    ((y - target) ** 2).sum(-1).mean().backward()
    return model, x, y.detach()


def rank_checks() -> dict:
    """Every strategy on this rank against the unsplit model; returns what the parent checks."""
    rank, p = dist.get_rank(), dist.get_world_size()
    found = {}
    for k, cfg in enumerate(CONFIGS):
        cfg = par.Config(**{**vars(cfg), "L": max(cfg.L, p)})
        model, x_ref, y = unsplit(cfg)
        x, target = par.make_batch(cfg)

        dp = par.build_model(cfg)
        loss = par.data_parallel_step(dp, x, target)
        assert_close(loss, ((y - target) ** 2).sum(-1).mean())
        for mine, ref in zip(dp.parameters(), model.parameters()):
            assert_close(mine.grad, ref.grad)

        blocks = par.stage_blocks(cfg.L, p, rank)
        stage = nn.Sequential(*[model[i] for i in blocks])
        with torch.no_grad():
            y_mp = par.model_parallel_forward(stage, x)
            y_pp, schedule = par.pipeline_forward(stage, x, cfg.m)
        if rank == p - 1:
            assert_close(y_mp, y)
            assert_close(y_pp, y)
        else:
            assert y_mp is None and y_pp is None

        tp = nn.Sequential(*[par.TensorParallelBlock(b) for b in model])
        x_tp = x.clone().requires_grad_()
        y_tp = tp(x_tp)
        ((y_tp - target) ** 2).sum(-1).mean().backward()
        assert_close(y_tp.detach(), y)
        assert_close(x_tp.grad, x_ref.grad)
        pieces: list = [
            None
        ] * p  # every rank's slices, put back together, must be the full gradient
        dist.all_gather_object(
            pieces, [(b.w1.grad.cpu(), b.b1.grad.cpu(), b.w2.grad.cpu()) for b in tp]
        )
        for i, ref in enumerate(model):
            assert_close(
                torch.cat([pc[i][0] for pc in pieces]), ref.fc1.weight.grad.cpu()
            )
            assert_close(
                torch.cat([pc[i][1] for pc in pieces]), ref.fc1.bias.grad.cpu()
            )
            assert_close(
                torch.cat([pc[i][2] for pc in pieces], dim=1), ref.fc2.weight.grad.cpu()
            )
            assert_close(tp[i].b2.grad, ref.fc2.bias.grad)

        # Without f's all-reduce in backward, the input gradient is wrong on more than one rank.
        backward = par.CopyToTensorParallel.backward
        par.CopyToTensorParallel.backward = staticmethod(lambda ctx, grad: (grad, None))
        try:
            x_bad = x.clone().requires_grad_()
            ((tp(x_bad) - target) ** 2).sum(-1).mean().backward()
        finally:
            par.CopyToTensorParallel.backward = backward
        found[k] = {
            "blocks": list(blocks),
            "schedule": schedule,
            "m": cfg.m,
            "L": cfg.L,
            "f_matters": not torch.allclose(x_bad.grad, x_ref.grad),
        }
    found["main"] = par.main()
    return found


@pytest.mark.parametrize("p", [1, 2, 3, 5])
def test_every_split_matches_the_unsplit_model(p: int) -> None:
    ranks = launch(rank_checks, p, backend="gloo", timeout_s=60)
    for k in range(len(CONFIGS)):
        per_rank = [r[k] for r in ranks]
        L, m = per_rank[0]["L"], per_rank[0]["m"]
        assert sum((r["blocks"] for r in per_rank), []) == list(
            range(L)
        )  # contiguous, all, once
        assert (
            max(len(r["blocks"]) for r in per_rank)
            - min(len(r["blocks"]) for r in per_rank)
            <= 1
        )
        for rank, r in enumerate(
            per_rank
        ):  # GPipe: stage s runs micro-batch j at step s + j
            assert r["schedule"] == [(j, rank + j) for j in range(m)]
        assert par.bubble_fraction([r["schedule"] for r in per_rank]) == Fraction(
            p - 1, m + p - 1
        )
        assert all(r["f_matters"] for r in per_rank) == (p > 1)
    result = ranks[0]["main"]
    assert result["world_size"] == p and result["bubble"] == (p - 1) / (
        par.Config.m + p - 1
    )
    for name in ("data", "model", "pipeline", "tensor"):
        rows = result["tables"][name]
        assert [row["rank"] for row in rows] == list(range(p))
        assert all(
            row["max abs diff"] < 1e-5
            for row in rows
            if isinstance(row["max abs diff"], float)
        )
    assert (
        sum(row["params"] for row in result["tables"]["model"])
        == result["tables"]["data"][0]["params"]
    )
    assert sum(row["params"] for row in result["tables"]["tensor"]) == (
        result["tables"]["data"][0]["params"]
        + (p - 1) * par.Config.d * max(par.Config.L, p)
    )  # b2 is replicated
    gantt = result["markdown"][
        "gantt"
    ]  # drawn from the recorded schedule: stage s, micro-batch j at s + j
    assert gantt.count(" : ") == p * par.Config.m
    assert all(
        f"F{j} : s{s}m{j}, {1000 * (s + j)}, {1000 * (s + j + 1)}\n" in gantt
        for s in range(p)
        for j in range(par.Config.m)
    )


@pytest.mark.parametrize("p, m", [(1, 1), (2, 1), (4, 4), (4, 8), (5, 3), (8, 32)])
def test_bubble_of_a_gpipe_and_a_sequential_schedule(p: int, m: int) -> None:
    gpipe = [[(j, s + j) for j in range(m)] for s in range(p)]
    assert (
        par.bubble_fraction(gpipe)
        == par.gpipe_bubble(p, m)
        == Fraction(p - 1, m + p - 1)
    )
    one_at_a_time = [
        [(j, s * m + j) for j in range(m)] for s in range(p)
    ]  # naive model parallel
    assert par.bubble_fraction(one_at_a_time) == Fraction(p - 1, p)


@pytest.mark.parametrize("n, parts", [(10, 4), (7, 3), (32, 5), (6, 6), (1, 1)])
def test_split_sizes_agree_with_tensor_split(n: int, parts: int) -> None:
    assert par.split_sizes(n, parts, "x") == [
        len(c) for c in torch.arange(n).tensor_split(parts)
    ]
    ranges = [par.stage_blocks(n, parts, r) for r in range(parts)]
    assert [i for r in ranges for i in r] == list(range(n))


@pytest.mark.parametrize("n, parts", [(3, 5), (4, 0)])
def test_split_sizes_rejects_empty_parts(n: int, parts: int) -> None:
    with pytest.raises(ValueError, match="cannot split"):
        par.split_sizes(n, parts, "blocks")


@pytest.mark.parametrize(
    "argv", [["--micro-batches", "0"], ["--batch", "-3"], ["--layers", "two"]]
)
def test_bad_option_is_one_line_and_exit_2(
    argv: list[str], capsys: pytest.CaptureFixture
) -> None:
    with pytest.raises(
        SystemExit
    ) as exit_:  # the parser `python -m snippets run parallelism` uses
        snippet_options(par, argv, "python -m snippets run parallelism")
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and argv[0] in err
    good = snippet_options(par, ["--micro-batches", "8"], "p")
    assert good == {"micro_batches": 8, "batch": par.Config.B, "layers": None}
