"""ZeRO stages 1-3: training equals one process on the concatenated batch and torch's
ZeroRedundancyOptimizer; bytes held and values communicated equal the paper's
formulas, exactly once the rounding of uneven shards is counted."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch
import torch.distributed as dist
from conftest import REPO
from torch.distributed.optim import ZeroRedundancyOptimizer
from torch.nn.parallel import DistributedDataParallel

from snippets.core.cli import OneLineParser
from snippets.core.runtime import UsageError, launch
from snippets.models.tiny_gpt import GPT, GPTConfig
from snippets.parallel import zero, zero_memory, zero_training

CFG = GPTConfig(vocab_size=64, block_size=16, n_layer=2, n_head=2, n_embd=32)
F64 = torch.float64
OPTIMIZERS = {
    "sgd": (torch.optim.SGD, {"lr": 0.1}),
    "adam": (torch.optim.Adam, {"lr": 1e-2}),
}


def torch_zero(data) -> dict:
    """torch's DDP + ZeroRedundancyOptimizer(Adam), this rank's rows of each batch."""
    rank, N = dist.get_rank(), dist.get_world_size()
    model = DistributedDataParallel(GPT(CFG).to(F64))
    opt = ZeroRedundancyOptimizer(
        model.parameters(), optimizer_class=torch.optim.Adam, lr=1e-2
    )
    for idx, targets in data:
        b = idx.shape[0] // N
        opt.zero_grad()
        rows = slice(rank * b, (rank + 1) * b)
        model(idx[rows], targets[rows])[1].backward()
        opt.step()
    return {k: v.detach().clone() for k, v in model.module.state_dict().items()}


def checks() -> dict:
    """Every stage with SGD and Adam on this world, in one spawn."""
    N = dist.get_world_size()
    data = zero_training.batches(CFG, steps=2, rows=2 * N)
    ours_vs_torch = torch_zero(data)
    out = {"rows": [], "main": zero.main(steps=1) if N == 3 else None}
    for name, (cls, kw) in OPTIMIZERS.items():
        reference = zero_training.train_single(CFG, cls, kw, data, F64)
        for stage in (1, 2, 3):
            module, opt, comm = zero_training.train_sharded(
                CFG, stage, cls, kw, data, F64
            )
            state = zero.full_state_dict(module)
            row = {
                "optimizer": name,
                "stage": stage,
                "keys": sorted(state) == sorted(reference),
                "vs_single": zero_training.max_difference(state, reference),
                "vs_torch": zero_training.max_difference(state, ours_vs_torch),
                "memory": zero.memory_report(module, opt),
                "mine": sum(pc.b - pc.a for pc in opt.pieces),
                "padded": sum(pc.N * pc.s for pc in opt.pieces),
                "pieces": len(opt.pieces),
                "comm": comm,
            }
            out["rows"].append(row)
    return out


@pytest.fixture(scope="module", params=[1, 2, 3])
def world(request) -> tuple[int, dict]:
    return request.param, launch(checks, request.param, "gloo", timeout_s=60)[0]


def test_training_equals_one_process_and_torch(world) -> None:
    N, result = world
    for row in result["rows"]:
        where = f"N={N} stage {row['stage']} {row['optimizer']}"
        assert row["keys"], where
        assert row["vs_single"] < 1e-12, where
        if row["optimizer"] == "adam" and row["stage"] < 3:
            assert row["vs_torch"] < 1e-12, where  # ZeroRedundancyOptimizer


def test_bytes_held_equal_the_formulas(world) -> None:
    N, result = world
    psi = CFG.num_params()  # the tied head counted once
    for row in result["rows"]:
        if row["optimizer"] != "adam":
            continue
        s, m = row["stage"], row["memory"]
        assert m["optimizer_scalars"] == 4 * row["pieces"]  # Adam's step counters
        held = m["parameters"] + m["gradients"] + m["optimizer"]
        held -= m["optimizer_scalars"]
        exact = zero_memory.sharded_bytes(s, psi, row["mine"], 8, 8, 16)
        assert m["parameters"] == exact["parameters"]
        assert m["gradients"] == exact["gradients"]
        assert held == exact["total"]
        paper = zero_memory.model_state_bytes(s, psi, N, 8, 8, 16)["total"]
        assert abs(held - paper) <= 32 * row["pieces"]  # < 1 value per parameter
        assert 0 <= row["mine"] - psi / N < row["pieces"]


def test_values_communicated_equal_2psi_and_3psi(world) -> None:
    N, result = world
    psi = CFG.num_params()
    for row in result["rows"]:
        padded = row["padded"]
        assert (padded > psi) == (N == 3)  # N = 3 pads, so padding is exercised
        gathers = 2 if row["stage"] == 3 else 1
        for step in row["comm"]:
            assert step == {"reduce_scatter": padded, "all_gather": gathers * padded}
            total = sum(step.values())
            assert total == zero_memory.comm_values(row["stage"], padded)
            paper = zero_memory.comm_values(row["stage"], psi)
            assert 0 <= total - paper < 3 * N * row["pieces"]  # < N per parameter


def test_snippet_main_reports_every_stage(world) -> None:
    N, result = world
    if N != 3:
        pytest.skip("the snippet runs once, on 3 ranks")
    rows = result["main"]["tables"]["stages"]
    assert [r["stage"] for r in rows] == [1, 2, 3]
    for r in rows:
        assert r["max_abs_diff"] < 1e-12
        assert r["comm_measured"] >= r["comm_formula"]
        assert abs(r["bytes_measured"] - r["bytes_formula"]) < 0.01 * r["bytes_formula"]
    assert len(result["main"]["tables"]["formula_mixed"]) == 8


def test_paper_formulas_for_mixed_precision_adam() -> None:
    psi = 7.5e9  # the paper's Figure 1 example: 120, 31.4, 16.6, 1.9 GB on 64 ranks
    p, g, K = zero_memory.PRECISIONS["mixed Adam"]
    got = [
        zero_memory.model_state_bytes(s, psi, 64, p, g, K)["total"] for s in range(4)
    ]
    written = [
        16 * psi,
        4 * psi + 12 * psi / 64,
        2 * psi + 14 * psi / 64,
        16 * psi / 64,
    ]
    assert got == pytest.approx(written)
    assert [round(x / 1e9, 1) for x in got] == [120.0, 31.4, 16.6, 1.9]
    assert zero_memory.formula_table(100, "fp32 Adam")[1]["stage 1"] == 800 + 400


def test_a_stage_outside_1_to_3_is_one_usage_error() -> None:
    with pytest.raises(UsageError, match="1, 2 or 3"):
        zero.shard(GPT(CFG), torch.optim.SGD, 4, lr=0.1)


@pytest.mark.parametrize("argv", [["--stage", "4"], ["--stage", "0"], ["--steps", "0"]])
def test_the_parser_refuses_bad_options(argv) -> None:
    parser = OneLineParser(prog="zero")
    zero.add_arguments(parser)
    with pytest.raises(SystemExit) as exit_:
        parser.parse_args(argv)
    assert exit_.value.code == 2


def test_cli_stage_4_is_one_line_and_exit_2() -> None:
    cmd = [sys.executable, "-m", "snippets", "run", "zero", "--stage", "4"]
    done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
