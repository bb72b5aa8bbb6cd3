"""Four ways to split one GPT over p ranks, and what each must send.

The shared model (``snippets.models.tiny_gpt``) is built from a fixed seed, so every
rank holds the same unsplit model to compare against. Then it is split four ways:

* data parallel (``batch_split``): a full copy per rank, the batch in shards,
  gradients all-reduced;
* naive model parallel (``layer_split``): contiguous blocks per rank, activations
  sent rank → rank + 1;
* pipeline parallel (GPipe, Huang et al. 2019; ``layer_split``): the same split, the
  batch in m micro-batches, so stages work at once; the logical clock in the schedule
  gives the bubble (p−1)/(m+p−1);
* tensor parallel (Megatron-LM, Shoeybi et al. 2019; ``weight_split``): every block cut
  by attention heads and MLP hidden units, one all-reduce after each half forward (the
  paper's g) and one before each half backward (f).

Each split must give the unsplit model's logits (and gradients), checked with
``assert_close``. Each strategy has a dedicated module that goes further: ``ddp``,
``zero``, ``pipeline_schedules``, ``tensor_parallel``.

    python -m snippets run parallelism_overview -n 3 --micro-batches 8
    torchrun --nproc-per-node 4 -m snippets run parallelism_overview
"""

from __future__ import annotations

import argparse
from dataclasses import asdict, replace

import torch
import torch.distributed as dist
import torch.nn as nn

from snippets.core.claims import law
from snippets.core.cli import main_entry, positive_int
from snippets.core.compare import max_difference
from snippets.core.runtime import Spec, UsageError, device, print0
from snippets.models.tiny_gpt import GPT, GPTConfig, random_batch
from snippets.parallel.batch_split import batch_split_step
from snippets.parallel.layer_split import (
    bubble_fraction,
    gpipe_bubble,
    gpipe_forward,
    layer_split_forward,
    part,
    schedule_rows,
    split_sizes,
)
from snippets.parallel.weight_split import dense_parts, weight_split_block

SPEC = Spec(
    summary="data, model, pipeline and tensor parallelism on one GPT, each checked",
    world_size=4,
)

# --8<-- [start:model]
# The GPT every rank builds whole. Untied embeddings, so that a layer split gives
# each parameter to exactly one stage; 8 heads of width 4, so up to 8 ranks can share
# the heads.
MODEL = GPTConfig(
    vocab_size=32, block_size=8, n_layer=6, n_head=8, n_embd=32, tie_embeddings=False
)
B, M = 10, 4  # sequences in the batch, pipeline micro-batches


def make_batch(cfg: GPTConfig, B: int, seed: int = 1) -> tuple[torch.Tensor, ...]:
    """Token ids and next-token targets, (B, N) each, the same on every rank."""
    return random_batch(cfg, B, seed=seed, device=device())


# --8<-- [end:model]


def _numel(module: nn.Module | list) -> int:
    params = module.parameters() if isinstance(module, nn.Module) else module
    return sum(q.numel() for q in params)


def _delta(a: torch.Tensor, b: torch.Tensor) -> float:
    torch.testing.assert_close(a, b)  # the check: a failure here fails the run
    return max_difference(a, b)


def _span(what: str, r: range) -> str:
    return f"{what} {r.start}" if len(r) == 1 else f"{what}s {r.start}–{r.stop - 1}"


def check_all(cfg: GPTConfig, B: int, m: int, group=None) -> dict:
    """Run every split on this rank, check it against the unsplit model, and return
    this rank's rows: what it holds, what it sends, its worst |Δ| from the unsplit."""
    rank, p = dist.get_rank(group), dist.get_world_size(group)
    first, last = rank == 0, rank == p - 1
    N, d, L = cfg.block_size, cfg.n_embd, cfg.n_layer
    act_bytes = B * N * d * 4  # one (B, N, d) float32 activation

    model, (idx, targets) = GPT(cfg).to(device()), make_batch(cfg, B)
    logits, loss = model(idx, targets)  # the oracle: unsplit, whole batch, one process
    loss.backward()
    logits, loss = logits.detach(), loss.detach()
    grads = {n: q.grad.clone() for n, q in model.named_parameters()}

    dp = GPT(cfg).to(device())
    dp_loss = batch_split_step(dp, idx, targets, group)
    data = {
        "rank": rank,
        "holds": f"all {L} blocks",
        "params": _numel(dp),
        "sequences": len(idx.tensor_split(p)[rank]),
        "communicates": "all-reduce every gradient",
        "payload bytes": 4 * _numel(dp),
        "max abs diff": max(
            [_delta(dp_loss, loss)]
            + [_delta(q.grad, grads[n]) for n, q in dp.named_parameters()]
        ),
    }

    blocks = part(L, p, rank, "blocks")
    held = [model.blocks[i] for i in blocks]
    held += [model.tok_emb, model.pos_emb] * first + [model.ln_f, model.lm_head] * last
    with torch.no_grad():
        y_mp = layer_split_forward(model, idx, group)
        y_pp, schedule = gpipe_forward(model, idx, m, group)
    holds = ["embeddings"] * first + [_span("block", blocks)] + ["head"] * last
    layer = {
        "rank": rank,
        "holds": ", ".join(holds),
        "params": sum(_numel(x) for x in held),
        "communicates": "—" if last else f"send ({B}, {N}, {d}) → rank {rank + 1}",
        "bytes sent": 0 if last else act_bytes,
        "max abs diff": _delta(y_mp, logits) if last else "—",
    }
    pipe = {
        **layer,
        "micro-batches": ", ".join(map(str, split_sizes(B, m, "sequences"))),
        "communicates": "—" if last else f"{m} sends (+ clock) → rank {rank + 1}",
        "bytes sent": 0 if last else act_bytes + 8 * m,
        "max abs diff": _delta(y_pp, logits) if last else "—",
    }

    tp = GPT(cfg).to(device())
    tp.blocks = nn.ModuleList(weight_split_block(b, group) for b in tp.blocks)
    tp_logits, tp_loss = tp(idx, targets)
    tp_loss.backward()
    deltas = [_delta(tp_logits.detach(), logits), _delta(tp_loss.detach(), loss)]
    for name, q in tp.named_parameters():
        if not name.startswith("blocks."):  # embeddings and head: replicated
            deltas.append(_delta(q.grad, grads[name]))
    for i, blk in enumerate(tp.blocks):
        own = dict(blk.named_parameters())
        for name, (dense, index) in dense_parts(blk).items():
            deltas.append(_delta(own[name].grad, grads[f"blocks.{i}.{dense}"][index]))
    h, u = tp.blocks[0].heads, tp.blocks[0].hidden
    tensor = {
        "rank": rank,
        "holds": f"{_span('head', h)}, {_span('hidden unit', u)} of each block",
        "params": _numel(tp),
        "communicates": f"{4 * L} all-reduces of ({B}, {N}, {d})",
        "payload bytes": 4 * L * act_bytes,
        "max abs diff": max(deltas),
    }
    return {
        "data": data,
        "model": layer,
        "pipeline": pipe,
        "tensor": tensor,
        "schedule": schedule,
    }


def add_arguments(parser: argparse.ArgumentParser) -> None:
    for flag, default, metavar, text in (
        ("--micro-batches", M, "M", "pipeline micro-batches"),
        ("--batch", B, "B", "sequences in the batch"),
        ("--layers", None, "L", f"blocks (default: max({MODEL.n_layer}, ranks))"),
    ):
        parser.add_argument(
            flag, type=positive_int, default=default, metavar=metavar, help=text
        )


def _sizes(n: int, parts: int) -> str:
    """split_sizes, short: "3,3,2,2", or "12 × 4–3" when there are many."""
    s = split_sizes(n, parts, "")
    if parts <= 6:
        return ",".join(map(str, s))
    return f"{parts} × {s[0]}" + (f"–{s[-1]}" if s[0] != s[-1] else "")


def main(micro_batches: int = M, batch: int = B, layers: int | None = None) -> dict:
    p, m = dist.get_world_size(), micro_batches
    cfg = replace(MODEL, n_layer=max(MODEL.n_layer, p) if layers is None else layers)
    for n, parts, what in (
        (cfg.n_layer, p, "blocks"),
        (cfg.n_head, p, "heads"),
        (batch, m, "sequences"),
    ):
        try:  # every rank refuses before any rank waits on another
            split_sizes(n, parts, what)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    rows: list = [None] * p
    dist.all_gather_object(rows, check_all(cfg, batch, m))  # rank 0 gets every view
    schedules = [r["schedule"] for r in rows]
    bubble = bubble_fraction(schedules)
    law(bubble == gpipe_bubble(p, m), f"bubble {bubble} ≠ {gpipe_bubble(p, m)}")
    tables = {k: [r[k] for r in rows] for k in ("data", "model", "pipeline", "tensor")}
    worst = [
        max(r["max abs diff"] for r in t if isinstance(r["max abs diff"], float))
        for t in tables.values()
    ]
    T = 1 + max(t for s in schedules for _, t in s)
    L, N, d = cfg.n_layer, cfg.block_size, cfg.n_embd
    print0(
        f"GPT: {L} blocks, d={d}, {cfg.n_head} heads, V={cfg.vocab_size}; "
        f"batch B={batch} of N={N} tokens; {p} rank{'s' * (p > 1)}, "
        f"{dist.get_backend()}"
    )
    print0("max |Δ| from the unsplit model:")
    for name, checked, what, delta in zip(
        ("data", "model", f"pipeline m={m}", "tensor"),
        ("grads", "logits", "logits", "logits+grads"),
        (
            f"shards {_sizes(batch, p)}; all-reduce {_numel(GPT(cfg)):,} grads",
            f"blocks {_sizes(L, p)}; {p - 1} sends of (B, N, d)",
            f"micro-batches {_sizes(batch, m)}; {T} steps",
            f"heads {_sizes(cfg.n_head, p)}; {4 * L} all-reduces of (B, N, d)",
        ),
        worst,
    ):
        print0(f"  {name:<13} {delta:.1e} ✓ {checked:<12}  {what}")
    print0(f"GPipe forward (F<j>: micro-batch j), bubble {bubble} = (p-1)/(m+p-1) ✓")
    grid = schedule_rows(schedules)
    for r in grid if 4 * T + 8 <= 88 else []:  # wider: only the chart and the table
        cells = " ".join(f"{c:>3}" for k, c in r.items() if k != "stage")
        print0(f"  {r['stage']} {cells}")
    return {
        "tables": {**tables, "schedule": grid},
        "world_size": p,
        "bubble": float(bubble),
        "config": {**asdict(cfg), "batch": batch, "micro_batches": m},
    }


if __name__ == "__main__":
    raise SystemExit(main_entry(main, SPEC))
