"""nvlink_vs_pcie: DDP gradients equal the full-batch oracle; each variant's ranks see their own NCCL_P2P_DISABLE."""

from __future__ import annotations

import copy
import os

import pytest
import torch
import torch.distributed as dist
import torch.nn.functional as F

from snippets.core.runtime import launch
from snippets.hardware.nvlink_vs_pcie import GPTConfig, TinyGPT, ddp_step_seconds, main

ODD = GPTConfig(vocab=37, d=24, layers=1, heads=3, seq=7, batch=3)


def _three_ranks() -> dict:
    # the module's own check runs inside; here an independent one: after one DDP step with
    # SGD, every rank holds the weights of a single model stepped on the whole batch
    out = ddp_step_seconds(ODD, iters=2)
    rank, p = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = TinyGPT(ODD)
    ref = copy.deepcopy(model)
    x = torch.randint(ODD.vocab, (p * ODD.batch, ODD.seq))
    y = torch.randint(ODD.vocab, (p * ODD.batch, ODD.seq))
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    opt, ref_opt = (
        torch.optim.SGD(ddp.parameters(), lr=0.1),
        torch.optim.SGD(ref.parameters(), lr=0.1),
    )
    mine = slice(rank * ODD.batch, (rank + 1) * ODD.batch)
    F.cross_entropy(ddp(x[mine]).flatten(0, 1), y[mine].flatten()).backward()
    opt.step()
    F.cross_entropy(ref(x).flatten(0, 1), y.flatten()).backward()
    ref_opt.step()
    for a, b in zip(model.parameters(), ref.parameters()):
        assert torch.allclose(a, b, atol=1e-5), (
            "DDP step differs from the full-batch step"
        )
    return out


def test_ddp_matches_full_batch_three_ranks() -> None:
    outs = launch(_three_ranks, 3, backend="gloo", timeout_s=90)
    assert all(o["ranks"] == 3 and o["step_s"] > 0 for o in outs)
    assert (
        len({o["step_s"] for o in outs}) == 1
    )  # time_it: every rank reports the slowest rank's time


def test_both_variants_and_their_environment(capsys) -> None:
    before = os.environ.get("NCCL_P2P_DISABLE")
    out = main(size="tiny", iters=2)
    assert [r["NCCL_P2P_DISABLE"] for r in out["runs"]] == [
        "0",
        "1",
    ]  # read inside the spawned ranks
    assert (
        os.environ.get("NCCL_P2P_DISABLE") == before
    )  # the parent's environment is put back
    steps = out["runs"]
    assert out["ratio_off_over_on"] == pytest.approx(
        steps[1]["step_s"] / steps[0]["step_s"]
    )
    if out["backend"] == "gloo":
        assert "ratio is noise" in capsys.readouterr().out


def test_bad_arguments() -> None:
    with pytest.raises(ValueError):
        main(size="huge")


@pytest.mark.gpu
@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs 2 or more CUDA GPUs")
def test_nccl_variants_on_gpus() -> None:
    out = main(size="tiny", iters=2)
    assert out["backend"] == "nccl" and out["ratio_off_over_on"] > 0
