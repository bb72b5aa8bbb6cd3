"""nvlink_vs_pcie: DDP gradients equal the full-batch oracle; each variant's ranks see
their own NCCL_P2P_DISABLE; bad options are one line and exit 2."""

from __future__ import annotations

import copy
import os
import statistics

import pytest
import torch
import torch.distributed as dist
from conftest import refused

import snippets.hardware.nvlink_vs_pcie as N
from snippets.core.runtime import launch
from snippets.hardware.nvlink_vs_pcie import (
    SIZES,
    Workload,
    ddp_step_seconds,
    main,
)
from snippets.models.tiny_gpt import GPT, GPTConfig, random_batch

ODD = Workload(GPTConfig(37, 7, 1, n_head=3, n_embd=24), batch=3)


def _three_ranks() -> dict:
    # the module's own check runs inside; here an independent one: after one DDP step
    # with SGD, every rank holds the weights of one model stepped on the whole batch
    out = ddp_step_seconds(ODD, iters=2)
    rank, p, cfg = dist.get_rank(), dist.get_world_size(), ODD.model
    model = GPT(cfg, seed=0)
    ref = copy.deepcopy(model)
    x, y = random_batch(cfg, p * ODD.batch, seed=2)  # not the module's batch
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.1)
    mine = slice(rank * ODD.batch, (rank + 1) * ODD.batch)
    ddp(x[mine], y[mine])[1].backward()
    opt.step()
    ref(x, y)[1].backward()
    ref_opt.step()
    for a, b in zip(model.parameters(), ref.parameters()):
        assert torch.allclose(a, b, atol=1e-5), "DDP step differs from the full batch"
    return out


def test_ddp_matches_full_batch_three_ranks() -> None:
    outs = launch(_three_ranks, 3, backend="gloo", timeout_s=90)
    assert all(o["ranks"] == 3 and o["step_s"] > 0 for o in outs)
    assert len({o["step_s"] for o in outs}) == 1  # every rank reports the slowest's


def test_both_variants_take_turns_in_their_own_environment(capsys) -> None:
    before = os.environ.get("NCCL_P2P_DISABLE")
    out = main(size="tiny", iters=2, rounds=3)
    assert os.environ.get("NCCL_P2P_DISABLE") == before  # the parent's is put back
    assert [len(out["seconds"][f]) for f in ("0", "1")] == [3, 3]
    rows = out["tables"]["steps"]
    assert [r["NCCL_P2P_DISABLE"] for r in rows] == ["0", "1"]
    assert rows[0]["parameters"] == SIZES["tiny"].model.num_params()
    on, off = out["seconds"]["0"], out["seconds"]["1"]
    assert out["ratios"] == [b / a for a, b in zip(on, off)]  # paired by round
    assert out["ratio_off_over_on"] == statistics.median(out["ratios"])
    printed = capsys.readouterr().out
    assert max(len(line) for line in printed.splitlines()) <= 88
    verdict = out["markdown"]["verdict"]
    assert f"{statistics.median(out['ratios']):.2f} [" in verdict
    if out["backend"] == "gloo":
        where = " ".join(out["markdown"]["where"].split())
        assert "not a link" in verdict and "with no GPU" in where


def _variant_seen(flag: str, *_: object) -> dict:
    # stands in for a launch: what the ranks would see, in the order they ran
    ORDER.append(flag)
    return {"step_s": 1.0 + len(ORDER), "NCCL_P2P_DISABLE": flag}


ORDER: list[str] = []


def test_the_variants_alternate_so_neither_always_goes_first(monkeypatch) -> None:
    monkeypatch.setattr(N, "run_variant", _variant_seen)
    ORDER.clear()
    main(size="tiny", iters=1, rounds=4)
    assert ORDER == ["0", "1", "1", "0", "0", "1", "1", "0"]


def test_the_opening_box_says_what_ran_on_either_backend() -> None:
    cpu = " ".join(N.where("tiny", 2, "gloo", "a CPU").split())
    gpu = " ".join(N.where("small", 8, "nccl", "8× H100").split())
    assert cpu.startswith('!!! info "What ran, and where" Our run')
    assert "2 gloo ranks" in cpu and "with no GPU" in cpu and "`tiny`" in cpu
    assert "8 GPUs (8× H100)" in gpu and "NCCL" in gpu and "no GPU" not in gpu
    assert all("#someone-elses-measurement" in box for box in (cpu, gpu))


def test_the_small_size_is_the_one_the_note_describes() -> None:
    # the note: "about 49 million parameters ... about 196 MB of fp32 gradients"
    n = SIZES["small"].model.num_params()
    assert round(n / 1e6) == 49 and round(4 * n / 1e6) == 196


@pytest.mark.parametrize(
    "argv, says",
    [(["--iters", "0"], "--iters"), (["--iters", "x"], "--iters"),
     (["--rounds", "0"], "--rounds"), (["--size", "huge"], "--size")],
)  # fmt: skip
def test_bad_options_are_one_line_and_exit_2(argv: list[str], says: str, capfd) -> None:
    cmd = ["run", "nvlink_vs_pcie", *argv]
    assert says in refused(cmd, capfd, nothing_on_stdout=True)


@pytest.mark.gpu
@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs 2 or more CUDA GPUs")
def test_nccl_variants_on_gpus() -> None:
    out = main(size="tiny", iters=2, rounds=2)
    assert out["backend"] == "nccl" and out["ratio_off_over_on"] > 0
