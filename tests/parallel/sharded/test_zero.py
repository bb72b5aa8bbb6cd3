"""ZeRO stages 1-3 on 1-5 ranks: training equals one process on the concatenated batch
(fp64 to 1e-12, fp32 within assert_close's defaults), torch's ZeroRedundancyOptimizer
(stages 1-2) and FSDP2's fully_shard (stage 3, which runs on gloo in torch 2.13); bytes
held and values communicated equal the paper's formulas, exactly once the rounding of
uneven shards is counted. Edge cases in the same launches: frozen parameters, one that
forward never uses, a parameter smaller than the world (an empty chunk), and the loss
scaled under accumulation (k micro-steps of loss ÷ k equal one big step)."""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist
import torch.nn as nn
from conftest import refused
from torch.distributed.fsdp import fully_shard
from torch.distributed.optim import ZeroRedundancyOptimizer
from torch.nn.parallel import DistributedDataParallel

from snippets.core.cli import OneLineParser
from snippets.core.compare import max_difference
from snippets.core.runtime import UsageError, launch
from snippets.models.tiny_gpt import GPT, GPTConfig, random_batch
from snippets.parallel.sharded import mixed_precision, zero
from snippets.sizing import zero_memory

CFG = GPTConfig(vocab_size=64, block_size=16, n_layer=2, n_head=2, n_embd=32)
# 4 and 5 ranks on 2 cores wait on every collective: 11 parameters instead of 36
WIDE = GPTConfig(vocab_size=64, block_size=16, n_layer=1, n_embd=32, bias=False)
F64 = torch.float64
OPTIMIZERS = {
    "sgd": (torch.optim.SGD, {"lr": 0.1}),
    "adam": (torch.optim.Adam, {"lr": 1e-2}),
}


def train_torch(model: nn.Module, opt, data) -> None:
    rank, N = dist.get_rank(), dist.get_world_size()
    for idx, targets in data:
        b = idx.shape[0] // N
        opt.zero_grad()
        rows = slice(rank * b, (rank + 1) * b)
        model(idx[rows], targets[rows])[1].backward()
        opt.step()


def torch_zero(data) -> dict:
    """torch's DDP + ZeroRedundancyOptimizer(Adam), this rank's rows of each batch."""
    model = DistributedDataParallel(GPT(CFG).to(F64))
    opt = ZeroRedundancyOptimizer(
        model.parameters(), optimizer_class=torch.optim.Adam, lr=1e-2
    )
    train_torch(model, opt, data)
    return {k: v.detach().clone() for k, v in model.module.state_dict().items()}


def torch_fsdp2(data, cfg: GPTConfig = CFG) -> dict:
    """torch's FSDP2 with Adam: each block a unit, the root (embeddings, tied head)."""
    model = GPT(cfg).to(F64)
    for block in model.blocks:
        fully_shard(block)
    fully_shard(model)
    train_torch(model, torch.optim.Adam(model.parameters(), lr=1e-2), data)
    return {k: v.full_tensor() for k, v in model.state_dict().items()}


def mismatch(state: dict, reference: dict) -> str | None:
    """None if torch.testing.assert_close (its dtype's default tolerances) passes."""
    try:
        torch.testing.assert_close(state, reference)
    except AssertionError as error:
        return str(error)
    return None


def stage_row(module, opt, comm, oracles: dict, **extra) -> dict:
    """What one trained stage holds and sent, and its largest gap to each oracle."""
    state = zero.full_state_dict(module)
    return {
        "keys": sorted(state) == sorted(oracles["single"]),
        "memory": zero.memory_report(module, opt),
        "mine": sum(pc.b - pc.a for pc in opt.pieces),
        "padded": sum(pc.N * pc.s for pc in opt.pieces),
        "pieces": len(opt.pieces),
        "comm": comm,
        "vs": {k: max_difference(state, v) for k, v in oracles.items()},
        **extra,
    }


def checks() -> dict:
    """Every stage on this world in one spawn: Adam in fp64 against one process and
    torch's two, SGD in fp32 against one process, and (on 3 ranks) the edge cases.
    fp32 takes SGD: Adam divides by √v, so a gradient that is zero in exact arithmetic
    (the key bias: softmax ignores a constant added to every score) steps ±lr on
    rounding noise alone, in one process as much as in several."""
    N = dist.get_world_size()
    data = random_batch(CFG, 2 * N, steps=2)
    adam, kw = OPTIMIZERS["adam"]
    oracles = {
        "single": zero.train_single(CFG, adam, kw, data, F64),
        "torch_zero": torch_zero(data),
        "fsdp2": torch_fsdp2(data),
    }
    out = {"rows": [], "psi": CFG.num_params(), "fp32": {}}
    out["main"] = zero.main(steps=1) if N == 3 else None
    out["mixed"] = mixed_precision.main(steps=2) if N == 2 else None
    for stage in (1, 2, 3):
        trained = zero.train_sharded(CFG, stage, adam, kw, data, F64)
        out["rows"].append(stage_row(*trained, oracles, optimizer="adam", stage=stage))
    sgd, kw = OPTIMIZERS["sgd"]
    fp32 = zero.train_single(CFG, sgd, kw, data, torch.float32)
    for stage in (1, 2, 3):
        module = zero.train_sharded(CFG, stage, sgd, kw, data, torch.float32)[0]
        out["fp32"][stage] = mismatch(zero.full_state_dict(module), fp32)
    out["edges"] = edge_checks() if N == 3 else None
    return out


FROZEN = ("pos_emb.weight", "blocks.0.ln1.bias")


def edge_model(cfg: GPTConfig) -> nn.Module:
    """The tiny GPT with two frozen parameters and one that forward never uses, of 2
    values: on 3 ranks the last rank's chunk of it is empty."""
    model = GPT(cfg)
    for name, param in model.named_parameters():
        param.requires_grad_(name not in FROZEN)
    model.unused = nn.Parameter(torch.ones(2))
    return model


def edge_checks() -> list[dict]:
    """SGD, which sees a wrongly scaled loss (Adam would not), 2 micro-steps of loss ÷ 2
    a step, against one process taking one backward over the whole batch."""
    N = dist.get_world_size()
    data = random_batch(CFG, 2 * N, steps=2)
    sgd, kw = OPTIMIZERS["sgd"]
    single = zero.train_single(CFG, sgd, kw, data, F64, make=edge_model)
    init = edge_model(CFG).to(F64).state_dict()
    rows = []
    for stage in (1, 2, 3):
        module, opt, _ = zero.train_sharded(
            CFG, stage, sgd, kw, data, F64, make=edge_model, micro_steps=2
        )
        state = zero.full_state_dict(module)
        watched = (*FROZEN, "unused", "blocks.0.ln1.weight")
        unused = next(pc for pc in opt.pieces if pc.param is module.unused)
        rows.append(
            {
                "stage": stage,
                "vs_single": max_difference(state, single),
                "moved": {k: not torch.equal(state[k], init[k]) for k in watched},
                "frozen_flags": [
                    n for n, p in module.named_parameters() if not p.requires_grad
                ],
                "memory": zero.memory_report(module, opt),
                "mine": sum(pc.b - pc.a for pc in opt.pieces),
                "unused_mine": unused.b - unused.a,
                "sharded": sum(pc.n for pc in opt.pieces),
            }
        )
    return rows


def wide_checks() -> dict[int, dict]:
    """4 ranks (a subgroup of the 5) and then all 5, Adam in fp64, in one spawn; FSDP2
    on the 5. Rank 4 waits out the 4-rank part."""
    adam, kw = OPTIMIZERS["adam"]
    out = {}
    for N, group in ((4, dist.new_group([0, 1, 2, 3])), (5, None)):
        if dist.get_rank() >= N:
            continue
        data = random_batch(WIDE, 2 * N, steps=2)
        oracles = {"single": zero.train_single(WIDE, adam, kw, data, F64)}
        if N == 5:
            oracles["fsdp2"] = torch_fsdp2(data, WIDE)
        rows = []
        for stage in (1, 2, 3):
            trained = zero.train_sharded(WIDE, stage, adam, kw, data, F64, group)
            rows.append(stage_row(*trained, oracles, optimizer="adam", stage=stage))
        out[N] = {"rows": rows, "psi": WIDE.num_params(), "main": None, "fp32": {}}
    return out


@pytest.fixture(scope="module")
def wide() -> dict[int, dict]:
    return launch(wide_checks, 5, "gloo", timeout_s=90)[0]


@pytest.fixture(scope="module", params=[1, 2, 3, 4, 5])
def world(request) -> tuple[int, dict]:
    N = request.param
    if N > 3:  # one launch of 5 ranks covers both
        return N, request.getfixturevalue("wide")[N]
    results = launch(checks, N, "gloo", timeout_s=60)
    return N, results[0] | {"edges": [r["edges"] for r in results]}


def test_training_equals_one_process_and_torch(world) -> None:
    N, result = world
    for row in result["rows"]:
        where = f"N={N} stage {row['stage']} {row['optimizer']}"
        assert row["keys"], where
        assert row["vs"]["single"] < 1e-12, where
        if N <= 3:  # torch's oracles ran here
            assert {"torch_zero", "fsdp2"} <= set(row["vs"]), where
        if row["stage"] < 3 and "torch_zero" in row["vs"]:
            assert row["vs"]["torch_zero"] < 1e-12, where  # ZeroRedundancyOptimizer
        if row["stage"] == 3 and "fsdp2" in row["vs"]:
            assert row["vs"]["fsdp2"] < 1e-12, where  # fully_shard


def test_fp32_training_is_within_torchs_default_tolerances(world) -> None:
    N, result = world
    if N > 3:
        pytest.skip("fp32 runs on 1-3 ranks; 4 and 5 check fp64")
    assert sorted(result["fp32"]) == [1, 2, 3]
    for stage, failure in result["fp32"].items():
        assert failure is None, f"N={N} stage {stage}: {failure}"


def test_frozen_unused_tiny_and_accumulated_parameters(world) -> None:
    N, result = world
    if N != 3:
        pytest.skip("the edge cases run on 3 ranks, where a 2-value parameter is short")
    psi = CFG.num_params()
    frozen = CFG.block_size * CFG.n_embd + CFG.n_embd  # pos_emb, blocks.0.ln1.bias
    trainable = psi - frozen + 2  # with the unused parameter
    for rank, rows in enumerate(result["edges"]):
        assert [r["unused_mine"] for r in rows] == [(1, 1, 0)[rank]] * 3
        for r in rows:
            where = f"rank {rank} stage {r['stage']}"
            assert r["vs_single"] < 1e-12, where  # 2 micro-steps == 1 big step
            assert r["moved"] == {
                FROZEN[0]: False,
                FROZEN[1]: False,
                "unused": False,
                "blocks.0.ln1.weight": True,
            }, where
            assert sorted(r["frozen_flags"]) == sorted(FROZEN), where
            assert r["sharded"] == trainable, where  # frozen ones are not sharded
            m, used_mine = r["memory"], r["mine"] - r["unused_mine"]
            params = frozen + (r["mine"] if r["stage"] == 3 else trainable)
            grads = used_mine if r["stage"] >= 2 else trainable - 2
            assert m["parameters"] == 8 * params, where  # stage 3 freed the unused one
            assert m["gradients"] == 8 * grads, where  # and it never had a gradient
            assert m["optimizer"] == 0, where  # plain SGD keeps no state


def test_bytes_held_equal_the_formulas(world) -> None:
    N, result = world
    psi = result["psi"]  # the tied head counted once
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
    psi = result["psi"]
    for row in result["rows"]:
        padded = row["padded"]
        assert (padded > psi) == (N in (3, 5))  # so padding is exercised
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
    params = len(list(GPT(GPTConfig()).parameters()))  # the tied head once
    units = GPTConfig().n_layer + 1  # each block, and the rest
    calls = [(r["all_gathers"], r["reduce_scatters"]) for r in rows]
    assert calls == [(params, params), (params, params), (2 * units, units)]
    for r in rows:
        assert r["max_abs_diff"] < 1e-12
        assert r["comm_measured"] >= r["comm_formula"]
        assert abs(r["bytes_measured"] - r["bytes_formula"]) < 0.01 * r["bytes_formula"]
    assert len(result["main"]["tables"]["formula_mixed"]) == 8


def test_mixed_precision_bytes_are_the_papers_and_updates_close_to_fp32(world):
    N, result = world
    if N != 2:
        pytest.skip("the mixed-precision snippet runs once, on 2 ranks")
    out, psi = result["mixed"], GPTConfig().num_params()  # the snippet's model
    # its parameter sizes are all even: no padding on 2 ranks, so exactly the paper
    paper = [16 * psi, 4 * psi + 12 * psi // 2, 2 * psi + 14 * psi // 2, 16 * psi // 2]
    rows = out["tables"]["stages"]
    assert [r["bytes_measured"] for r in rows] == paper  # from the storages, exactly
    tolerance = mixed_precision.UPDATE_TOLERANCE
    assert all(r["update_error"] < tolerance for r in rows)
    assert out["bf16_alone_update_error"] > tolerance  # the bound can fail
    memory = out["tables"]["memory"]
    assert [r["N"] for r in memory] == list(range(1, 9))
    measured = [r for r in memory if "measured 0" in r]
    assert [r["N"] for r in measured] == [2]
    assert [measured[0][f"measured {s}"] for s in range(4)] == paper
    assert [measured[0][f"stage {s}"] for s in range(4)] == paper


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
def test_the_parser_refuses_bad_options(argv, capfd) -> None:
    parser = OneLineParser(prog="zero")
    zero.add_arguments(parser)
    refused(argv, capfd, entry=parser.parse_args)


def test_cli_stage_4_is_one_line_and_exit_2(capfd) -> None:
    refused(["run", "zero", "--stage", "4"], capfd)


# The training loops' own check: the single-process oracle is a hand-written SGD step.
SMALL = GPTConfig(vocab_size=16, block_size=8, n_layer=1, n_head=2, n_embd=16)


def test_train_single_is_two_plain_sgd_steps() -> None:
    data = random_batch(SMALL, 3, steps=2)
    torch.manual_seed(0)
    got = zero.train_single(SMALL, torch.optim.SGD, {"lr": 0.1}, data, torch.float64)
    torch.manual_seed(0)
    model = GPT(SMALL).to(torch.float64)
    for idx, targets in data:
        model.zero_grad()
        model(idx, targets)[1].backward()
        with torch.no_grad():
            for p in model.parameters():
                p -= 0.1 * p.grad
    want = model.state_dict()
    assert max_difference(got, want) < 1e-12
    assert max_difference(got, GPT(SMALL).to(torch.float64).state_dict()) > 1e-3
