"""Four ways to split one model over p ranks, and what each must send.

One tiny model, a stack of L transformer-style MLP blocks x + W2·GELU(W1·x + b1) + b2, is
built from a fixed seed, so every rank holds the same unsplit model to compare against.
Then it is split four ways:

* data parallel: a full copy per rank, the batch in shards, gradients all-reduced;
* naive model parallel: contiguous blocks per rank, activations sent rank → rank + 1;
* pipeline parallel (GPipe, Huang et al. 2019): the same split, the batch in m micro-batches,
  so stages work at once; the logical clock in the schedule gives the bubble (p−1)/(m+p−1);
* tensor parallel (Megatron-LM, Shoeybi et al. 2019): every block's W1 split by columns
  and W2 by rows, one all-reduce per block forward (the paper's g) and one backward (f).

Each split must give the unsplit model's output (and gradients), checked with ``assert``.

    python -m snippets.parallel.parallelism                  # 4 local ranks
    python -m snippets run parallelism -n 3 --micro-batches 8
    torchrun --nproc-per-node 4 -m snippets.parallel.parallelism
"""

from __future__ import annotations

import argparse
from dataclasses import asdict, dataclass
from fractions import Fraction

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

from snippets.core.cli import main_entry, positive_int
from snippets.core.runtime import Spec, UsageError, device, print0

SPEC = Spec(
    summary="data, model, pipeline and tensor parallelism on one MLP stack, checked against the unsplit model",
    world_size=4,
)


# --8<-- [start:model]
@dataclass(frozen=True)
class Config:
    d: int = 8  # model width
    h: int = 32  # hidden width, 4d as in a transformer's MLP
    L: int = 6  # blocks
    B: int = 10  # batch
    m: int = 4  # pipeline micro-batches
    seed: int = 0


class Block(nn.Module):
    """x + W2 GELU(W1 x + b1) + b2: a transformer MLP with its residual."""

    def __init__(self, d: int, h: int):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(d, h), nn.Linear(h, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # x: (B, d)
        return x + self.fc2(F.gelu(self.fc1(x)))


def build_model(cfg: Config) -> nn.Sequential:
    """The same unsplit model on every rank: parameters come from cfg.seed, not from the rank."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(cfg.seed)
        model = nn.Sequential(*[Block(cfg.d, cfg.h) for _ in range(cfg.L)])
    return model.to(device())


def make_batch(cfg: Config) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(cfg.seed + 1)
    x, target = torch.randn(2, cfg.B, cfg.d, generator=g)  # (B, d) each
    return x.to(device()), target.to(device())


def loss_fn(y: torch.Tensor, target: torch.Tensor, B: int) -> torch.Tensor:
    """Squared error summed over these rows, divided by the FULL batch size B: summed over
    shards (even uneven ones) it is exactly the full-batch mean."""
    return ((y - target) ** 2).sum() / B


# --8<-- [end:model]


def split_sizes(n: int, parts: int, what: str) -> list[int]:
    """torch.tensor_split's sizes: the first n % parts parts get one more."""
    if not 1 <= parts <= n:
        raise ValueError(
            f"cannot split {n} {what} into {parts} non-empty parts; use at most {n}"
        )
    return [n // parts + (i < n % parts) for i in range(parts)]


# --8<-- [start:data]
def data_parallel_step(
    model: nn.Module,
    x: torch.Tensor,
    target: torch.Tensor,
    group: dist.ProcessGroup | None = None,
) -> torch.Tensor:
    """Whole model here, 1/p of the batch; afterwards .grad holds the full-batch gradient."""
    rank, p = dist.get_rank(group), dist.get_world_size(group)
    x_r, t_r = (
        x.tensor_split(p)[rank],
        target.tensor_split(p)[rank],
    )  # (B_r, d), B_r = ⌈B/p⌉ or ⌊B/p⌋
    model.zero_grad()
    loss = loss_fn(model(x_r), t_r, x.shape[0])
    loss.backward()
    for param in model.parameters():
        dist.all_reduce(param.grad, group=group)  # Σ_r ∇loss_r = ∇(full-batch loss)
    loss = loss.detach().clone()
    dist.all_reduce(loss, group=group)
    return loss


# --8<-- [end:data]


# --8<-- [start:model_parallel]
def stage_blocks(L: int, p: int, rank: int) -> range:
    """The contiguous blocks that stage `rank` of p holds."""
    sizes = split_sizes(L, p, "blocks")
    return range(sum(sizes[:rank]), sum(sizes[: rank + 1]))


def model_parallel_forward(
    stage: nn.Module, x: torch.Tensor, group: dist.ProcessGroup | None = None
) -> torch.Tensor | None:
    """Rank 0 reads x; each stage runs its blocks and sends the activation on. The last
    stage returns the output, the others None. Only one rank works at a time."""
    rank, p = dist.get_rank(group), dist.get_world_size(group)
    a = (
        x if rank == 0 else torch.empty_like(x)
    )  # (B, d): every activation has the input's shape
    if rank > 0:
        dist.recv(a, group=group, group_src=rank - 1)
    a = stage(a)
    if rank < p - 1:
        dist.send(a, group=group, group_dst=rank + 1)
        return None
    return a


# --8<-- [end:model_parallel]


# --8<-- [start:pipeline]
def pipeline_forward(
    stage: nn.Module, x: torch.Tensor, m: int, group: dist.ProcessGroup | None = None
) -> tuple[torch.Tensor | None, list[tuple[int, int]]]:
    """GPipe's forward: the batch in m micro-batches, each passed on as soon as it is done.
    A logical clock travels with each activation: a stage runs micro-batch j at the first
    step after both its own previous micro-batch and the previous stage's run of j.
    Returns (the last stage's output or None, this stage's [(micro-batch, step)])."""
    rank, p = dist.get_rank(group), dist.get_world_size(group)
    micro = x.tensor_split(m)  # m × (B_j, d); only rank 0 reads the values
    split_sizes(x.shape[0], m, "samples")  # m ≤ B: no empty micro-batches
    free, schedule, outputs = 0, [], []
    for j, x_j in enumerate(micro):
        a, ready = x_j, 0
        if rank > 0:
            a, clock = (
                torch.empty_like(x_j),
                torch.empty(1, dtype=torch.int64, device=x.device),
            )
            dist.recv(a, group=group, group_src=rank - 1)
            dist.recv(clock, group=group, group_src=rank - 1)
            ready = int(clock.item()) + 1
        step = max(free, ready)
        a = stage(a)  # (B_j, d)
        schedule.append((j, step))
        free = step + 1
        if rank < p - 1:
            dist.send(a, group=group, group_dst=rank + 1)
            dist.send(
                torch.tensor([step], device=x.device), group=group, group_dst=rank + 1
            )
        else:
            outputs.append(a)
    return (torch.cat(outputs) if rank == p - 1 else None), schedule


def bubble_fraction(schedules: list[list[tuple[int, int]]]) -> Fraction:
    """Idle share of the p × T grid of (stage, step) slots, T = the steps the pipeline took."""
    T = 1 + max(step for s in schedules for _, step in s)
    busy = sum(len(s) for s in schedules)
    return Fraction(len(schedules) * T - busy, len(schedules) * T)


def gpipe_bubble(p: int, m: int) -> Fraction:
    """Huang et al. 2019: the bubble is (p − 1)/(m + p − 1) of the time."""
    return Fraction(p - 1, m + p - 1)


# --8<-- [end:pipeline]


# --8<-- [start:tensor]
class CopyToTensorParallel(torch.autograd.Function):
    """Megatron's f: identity forward; backward all-reduces the input's gradient, because
    every rank's slice of W1 contributed part of it."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, group: dist.ProcessGroup | None) -> torch.Tensor:
        ctx.group = group
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        grad = grad.clone()
        dist.all_reduce(grad, group=ctx.group)
        return grad, None


class ReduceFromTensorParallel(torch.autograd.Function):
    """Megatron's g: all-reduce forward (sum the partial W2 products); identity backward."""

    @staticmethod
    def forward(ctx, y: torch.Tensor, group: dist.ProcessGroup | None) -> torch.Tensor:
        y = y.clone()
        dist.all_reduce(y, group=group)
        return y

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        return grad, None


class TensorParallelBlock(nn.Module):
    """This rank's slice of a Block: its hidden units `cols` are rows of W1 (Megatron's
    column-parallel A; torch stores A transposed) and columns of W2 (the row-parallel B).
    GELU is elementwise, so the two matmuls need no communication in between (Megatron-LM,
    eq. 3); the sum over ranks happens once, in g."""

    def __init__(self, block: Block, group: dist.ProcessGroup | None = None):
        super().__init__()
        rank, p = dist.get_rank(group), dist.get_world_size(group)
        h = block.fc1.out_features
        sizes = split_sizes(h, p, "hidden units")
        self.cols, self.group = slice(sum(sizes[:rank]), sum(sizes[: rank + 1])), group
        w1, b1, w2 = (
            block.fc1.weight.detach(),
            block.fc1.bias.detach(),
            block.fc2.weight.detach(),
        )
        self.w1 = nn.Parameter(w1[self.cols].clone())  # (h_r, d)
        self.b1 = nn.Parameter(b1[self.cols].clone())  # (h_r,)
        self.w2 = nn.Parameter(w2[:, self.cols].clone())  # (d, h_r)
        self.b2 = nn.Parameter(
            block.fc2.bias.detach().clone()
        )  # (d,) added once, after the sum

    def forward(
        self, x: torch.Tensor
    ) -> torch.Tensor:  # x: (B, d), the same on every rank
        z = F.gelu(
            F.linear(CopyToTensorParallel.apply(x, self.group), self.w1, self.b1)
        )  # (B, h_r)
        y = ReduceFromTensorParallel.apply(
            F.linear(z, self.w2), self.group
        )  # (B, d) = Σ_r W2_r z_r
        return x + y + self.b2


# --8<-- [end:tensor]


def _numel(params) -> int:
    return sum(q.numel() for q in params)


def _delta(a: torch.Tensor, b: torch.Tensor) -> float:
    torch.testing.assert_close(a, b)  # the check: a failure here fails the run
    return (a - b).abs().max().item()


def check_all(cfg: Config, group: dist.ProcessGroup | None = None) -> dict:
    """Run every strategy on this rank, check it against the unsplit model, and return this
    rank's table rows: what it holds, what it sends, its worst |Δ| from the unsplit model."""
    rank, p = dist.get_rank(group), dist.get_world_size(group)
    last, nbytes = rank == p - 1, cfg.B * cfg.d * 4  # one (B, d) float32 activation

    def acts(rows: int, hidden: int) -> str:
        return f"({rows}, {cfg.d}) in and out, ({rows}, {hidden}) hidden"

    model, (x, target) = build_model(cfg), make_batch(cfg)
    x_ref = x.clone().requires_grad_()
    y_ref = model(
        x_ref
    )  # the oracle: the unsplit model, whole batch, in this one process
    loss_fn(y_ref, target, cfg.B).backward()
    y_ref, g_ref = y_ref.detach(), [q.grad.clone() for q in model.parameters()]

    dp = build_model(cfg)
    data_parallel_step(dp, x, target, group)
    data = {
        "rank": rank,
        "holds": f"all {cfg.L} blocks",
        "params": _numel(dp.parameters()),
        "activations": acts(len(x.tensor_split(p)[rank]), cfg.h),
        "communicates": "all-reduce every gradient",
        "payload bytes": 4 * _numel(dp.parameters()),
        "max abs diff": max(_delta(q.grad, r) for q, r in zip(dp.parameters(), g_ref)),
    }

    blocks = stage_blocks(cfg.L, p, rank)
    stage = nn.Sequential(*[model[i] for i in blocks])  # this rank's blocks only
    with torch.no_grad():
        y_mp = model_parallel_forward(stage, x, group)
        y_pp, schedule = pipeline_forward(stage, x, cfg.m, group)
    held = (
        f"blocks {blocks.start}–{blocks.stop - 1}"
        if len(blocks) > 1
        else f"block {blocks.start}"
    )
    model_row = {
        "rank": rank,
        "holds": held,
        "params": _numel(stage.parameters()),
        "activations": acts(cfg.B, cfg.h),
        "communicates": "—" if last else f"send ({cfg.B}, {cfg.d}) → rank {rank + 1}",
        "bytes sent": 0 if last else nbytes,
        "max abs diff": _delta(y_mp, y_ref) if last else "—",
    }
    pipe = {
        **model_row,
        "activations": ", ".join(
            f"({b}, {cfg.d})" for b in split_sizes(cfg.B, cfg.m, "samples")
        ),
        "communicates": "—" if last else f"{cfg.m} sends (+ clock) → rank {rank + 1}",
        "bytes sent": 0 if last else nbytes + 8 * cfg.m,
        "max abs diff": _delta(y_pp, y_ref) if last else "—",
    }

    tp = nn.Sequential(*[TensorParallelBlock(b, group) for b in model])
    x_tp = x.clone().requires_grad_()
    y_tp = tp(x_tp)
    loss_fn(y_tp, target, cfg.B).backward()
    c = tp[0].cols
    deltas = [_delta(y_tp.detach(), y_ref), _delta(x_tp.grad, x_ref.grad)]
    for i, t in enumerate(tp):  # model.parameters() order per block: W1, b1, W2, b2
        w1, b1, w2, b2 = g_ref[4 * i : 4 * i + 4]
        deltas += [
            _delta(t.w1.grad, w1[c]),
            _delta(t.b1.grad, b1[c]),
            _delta(t.w2.grad, w2[:, c]),
            _delta(t.b2.grad, b2),
        ]
    tensor = {
        "rank": rank,
        "holds": f"hidden units {c.start}–{c.stop - 1} of every block",
        "params": _numel(tp.parameters()),
        "activations": acts(cfg.B, c.stop - c.start),
        "communicates": f"{cfg.L} all-reduces of ({cfg.B}, {cfg.d}) forward, {cfg.L} backward",
        "payload bytes": 2 * cfg.L * nbytes,
        "max abs diff": max(deltas),
    }
    return {
        "data": data,
        "model": model_row,
        "pipeline": pipe,
        "tensor": tensor,
        "schedule": schedule,
    }


def schedule_rows(schedules: list[list[tuple[int, int]]]) -> list[dict]:
    """The recorded schedule as a grid: one row per stage, F<j> where it ran micro-batch j."""
    T = 1 + max(step for s in schedules for _, step in s)
    rows = []
    for rank, s in enumerate(schedules):
        cells = {step: f"F{j}" for j, step in s}
        rows.append(
            {"stage": f"rank {rank}", **{f"t={t}": cells.get(t, "·") for t in range(T)}}
        )
    return rows


def schedule_gantt(schedules: list[list[tuple[int, int]]], title: str) -> str:
    """The recorded schedule as a mermaid Gantt chart: one row per stage, one clock step
    drawn as one second (mermaid wants dates: milliseconds since 0, shown as seconds)."""
    lines = [
        "```mermaid",
        "---",
        "config:",
        "  gantt:",
        "    displayMode: compact",
        "---",
        "gantt",
        f"    title {title}",
        "    dateFormat x",
        "    axisFormat %s",
        "    tickInterval 1second",
    ]
    for rank, s in enumerate(schedules):
        lines.append(f"    section rank {rank}")
        lines += [
            f"    F{j} : s{rank}m{j}, {1000 * step}, {1000 * (step + 1)}"
            for j, step in s
        ]
    return "\n".join(lines + ["```"])


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--micro-batches",
        type=positive_int,
        default=Config.m,
        metavar="M",
        help="pipeline micro-batches",
    )
    parser.add_argument(
        "--batch",
        type=positive_int,
        default=Config.B,
        metavar="B",
        help="samples in the batch",
    )
    parser.add_argument(
        "--layers",
        type=positive_int,
        default=None,
        metavar="L",
        help="MLP blocks (default: max(6, ranks))",
    )


def main(
    micro_batches: int = Config.m, batch: int = Config.B, layers: int | None = None
) -> dict:
    p = dist.get_world_size()
    cfg = Config(
        L=max(Config.L, p) if layers is None else layers, B=batch, m=micro_batches
    )
    for n, parts, what in (
        (cfg.L, p, "blocks"),
        (cfg.h, p, "hidden units"),
        (cfg.B, cfg.m, "samples"),
    ):
        try:
            split_sizes(
                n, parts, what
            )  # every rank refuses before any rank waits on another
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    rows: list = [None] * p
    dist.all_gather_object(rows, check_all(cfg))  # rank 0 collects every rank's view
    schedules = [r["schedule"] for r in rows]
    bubble = bubble_fraction(schedules)
    assert bubble == gpipe_bubble(p, cfg.m), (
        f"pipeline bubble {bubble}, paper says {gpipe_bubble(p, cfg.m)}"
    )
    tables = {k: [r[k] for r in rows] for k in ("data", "model", "pipeline", "tensor")}
    worst = {
        k: max(
            v
            for r in t
            for c, v in r.items()
            if c == "max abs diff" and isinstance(v, float)
        )
        for k, t in tables.items()
    }

    T = 1 + max(t for s in schedules for _, t in s)
    print0(
        f"{cfg.L} blocks x + W2·GELU(W1·x + b1) + b2, d={cfg.d}, h={cfg.h}; batch {cfg.B}; "
        f"{p} rank{'s' * (p > 1)}, {dist.get_backend()}; max|Δ| from the unsplit model:"
    )
    lines = [
        (
            "data parallel",
            f"batch shards {[len(c) for c in torch.arange(cfg.B).tensor_split(p)]}, "
            f"all-reduce {tables['data'][0]['params']} grads",
            "grads",
            worst["data"],
        ),
        (
            "model parallel",
            f"blocks {[len(stage_blocks(cfg.L, p, r)) for r in range(p)]}, "
            f"{p - 1} sends of ({cfg.B}, {cfg.d})",
            "output",
            worst["model"],
        ),
        (
            f"pipeline, m={cfg.m}",
            f"micro-batches {split_sizes(cfg.B, cfg.m, 'samples')}, {T} steps",
            "output",
            worst["pipeline"],
        ),
        (
            "tensor parallel",
            f"hidden units {split_sizes(cfg.h, p, 'hidden units')}, "
            f"{2 * cfg.L} all-reduces of ({cfg.B}, {cfg.d})",
            "output, grads",
            worst["tensor"],
        ),
    ]
    width = max(len(what) for _, what, _, _ in lines)
    for name, what, checked, delta in lines:
        print0(f"  {name:<16} {what:<{width}}  {checked:<13} {delta:.1e} ✓")
    grid = schedule_rows(schedules)
    print0(
        f"pipeline schedule (F<j>: forward of micro-batch j), bubble {bubble} = (p-1)/(m+p-1) ✓"
    )
    for r in grid:
        print0(
            "  "
            + r["stage"]
            + " "
            + " ".join(f"{c:>3}" for k, c in r.items() if k != "stage")
        )
    gantt = schedule_gantt(
        schedules, f"GPipe forward, p = {p}, m = {cfg.m}: recorded clock steps"
    )
    return {
        "tables": {**tables, "schedule": grid},
        "markdown": {"gantt": gantt},
        "world_size": p,
        "bubble": float(bubble),
        "config": asdict(cfg),
    }


if __name__ == "__main__":
    raise SystemExit(main_entry(main, SPEC))
