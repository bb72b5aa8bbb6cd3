"""``python -m snippets bench tp``: our tensor-parallel MLP step beside DTensor's
(``parallelize_module`` with ``ColwiseParallel`` on fc, ``RowwiseParallel`` on proj).

    python -m snippets run tp_bench       # 2 ranks: the note's run
    python -m snippets bench tp [-n 2] [--rounds 35] [--json]    # the same program
    torchrun --nproc-per-node 2 -m snippets bench tp --json

Both sides cut the same dense MLP of the tiny GPT (d → 4d → d, from one seed): ours
with ``ColumnParallelLinear`` and ``RowParallelLinear``, DTensor's by its plans. A
step is forward and backward of (B·N, d) tokens with a fixed output gradient, the
input's gradient included (one all-reduce each way). After two untimed steps each,
the two take turns step by step, who goes first alternating (``snippets.core.timing``);
a step's time is the slowest rank's. The record is the harness's: each side's median
step and IQR, ``ratio`` = ours ÷ DTensor's step against step in the same round (its
median and IQR), and ``order``, what that IQR allows. ``cpu_ratio``: the same in CPU
time of the main thread, which says whether a gap is Python work or waiting.
``max_abs_diff``: output, input gradient and every weight gradient, ours vs theirs.
"""

from __future__ import annotations

import copy
import json
import textwrap

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor.parallel import (
    ColwiseParallel,
    RowwiseParallel,
    parallelize_module,
)

from snippets.core.cli import main_entry, positive_int
from snippets.core.runtime import Spec, UsageError, device, print0
from snippets.core.timing import interleave, record, sentence, spread
from snippets.models.tiny_gpt import GPT, GPTConfig
from snippets.parallel.tensor.tensor_parallel import (
    ColumnParallelLinear,
    RowParallelLinear,
)

BENCH = "tp"
SPEC = Spec(
    timed=True,  # it measures time: run-all runs it alone
    summary="our TP MLP step vs DTensor's parallelize_module",
    world_size=2,
)
TARGET = 1.0  # our step at most this many times DTensor's
CFG = GPTConfig(vocab_size=64, block_size=128, n_layer=1, n_head=4, n_embd=128)
ROWS = 8  # sequences: (8·128, 128) tokens, a ~10-20 ms step on one CPU core
ROUNDS = 35


# --8<-- [start:pair]
def mlp_pair(cfg: GPTConfig = CFG) -> tuple:
    """The same dense MLP cut twice over the world: by our layers, by DTensor's."""
    dev, t = device(), dist.get_world_size()
    dense = GPT(cfg).blocks[0].mlp.to(dev)
    ours = copy.deepcopy(dense)
    ours.fc = ColumnParallelLinear.from_dense(ours.fc)  # f, then x A_rᵀ
    ours.proj = RowParallelLinear.from_dense(ours.proj)  # x_r B_rᵀ, then g
    mesh = init_device_mesh(dev.type, (t,))
    plan = {"fc": ColwiseParallel(), "proj": RowwiseParallel()}
    return ours, parallelize_module(copy.deepcopy(dense), mesh, plan)


def stepper(module, x: torch.Tensor, dy: torch.Tensor):
    """Forward and backward, the input's gradient too; returns (y, ∂L/∂x)."""

    def step():
        for q in module.parameters():
            q.grad = None
        xx = x.detach().requires_grad_()
        y = module(xx)
        y.backward(dy)
        return y.detach(), xx.grad

    return step


# --8<-- [end:pair]


def local(t: torch.Tensor) -> torch.Tensor:
    return t.to_local() if hasattr(t, "to_local") else t


def measure(rounds: int, cfg: GPTConfig = CFG, rows: int = ROWS) -> dict:
    g, t = torch.Generator().manual_seed(1), dist.get_world_size()
    x, dy = torch.randn(2, rows * cfg.block_size, cfg.n_embd, generator=g).to(device())
    ours_mod, theirs_mod = mlp_pair(cfg)
    ours, theirs = stepper(ours_mod, x, dy), stepper(theirs_mod, x, dy)
    (y1, gx1), (y2, gx2) = ours(), theirs()  # the first warm-up step: the check
    diffs = [(y1 - y2).abs().max(), (gx1 - gx2).abs().max()]
    for (n, p1), p2 in zip(ours_mod.named_parameters(), theirs_mod.parameters()):
        diffs.append((p1.grad - local(p2.grad)).abs().max())
    steps = interleave({"ours": ours, "dtensor": theirs}, rounds, warmup=1)
    found = {"impl": "tp_mlp", "baseline": "dtensor", "world_size": t}
    found |= record(steps, "ours", "dtensor")  # times, ratio, CPU: every round
    found.update(max_abs_diff=max(d.item() for d in diffs), target=TARGET,
                 tokens=rows * cfg.block_size, d=cfg.n_embd)  # fmt: skip
    return found


def lines(r: dict) -> list[str]:
    head = (
        f"MLP d={r['d']} → {4 * r['d']} → {r['d']}, {r['tokens']} tokens, fp32, "
        f"{r['rounds']} rounds of one step each, in turns"
    )
    ms = [spread(r, k).text(1, 1e3) for k in ("time", "baseline_time")]
    return [
        head,
        f"ours ms {ms[0]}   DTensor ms {ms[1]}   max|Δ| {r['max_abs_diff']:.1e}",
        *textwrap.wrap(sentence(r, "our TP MLP step", "DTensor's"), width=88),
    ]


def add_arguments(parser) -> None:
    parser.add_argument(
        "--rounds", type=positive_int, default=ROUNDS, help="timed steps of each"
    )
    parser.add_argument(
        "--json", dest="as_json", action="store_true", help="one JSON record"
    )


def check_options(options: dict, world_size: int) -> None:
    """Before any rank starts (``runtime.run`` calls it): d and 4d are cut in as many
    blocks as there are ranks."""
    if CFG.n_embd % world_size:
        raise UsageError(
            f"-n {world_size}: d={CFG.n_embd} is not divisible by the tensor-parallel "
            f"size {world_size}; use a size that divides {CFG.n_embd}"
        )


def main(rounds: int = ROUNDS, as_json: bool = False) -> dict:
    r = measure(rounds)
    print0(json.dumps(r) if as_json else "\n".join(lines(r)))
    provenance = {"backend": dist.get_backend(), "world_size": r["world_size"]}
    return {
        "records": [r],
        "verdicts": [sentence(r, "our TP MLP step", "DTensor's")],
        "provenance": provenance,
    }


if __name__ == "__main__":
    raise SystemExit(main_entry(main, SPEC))
