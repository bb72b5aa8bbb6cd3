"""Context parallel training of the tiny GPT, checked against one process.

Every rank builds the same GPT from one seed; on the cp ranks its attention runs as
ring attention (``context_parallel_gpt``) and each rank trains on its zig-zag shard
of every sequence. Each step compares with the whole sequence in one process, in
fp64: the loss (mean of the ranks' means), this rank's logits, every gradient after
the SUM ÷ cp all-reduce, every parameter after the Adam step. Two deliberate
mistakes show the check can fail: embedding the shard at positions 0..s/cp−1, and
using a rank's gradient before the all-reduce. The ring's sends are counted at the
op, per layer and phase, against ``ring_elements``.

    python -m snippets run context_parallel          # cp = 2; -n 3 or -n 4 work too
    torchrun --nproc-per-node 2 -m snippets run context_parallel
"""

from __future__ import annotations

import argparse
import copy

import torch
import torch.distributed as dist

from snippets.attention.zigzag_layout import zigzag_shard
from snippets.core.claims import law
from snippets.core.cli import main_entry, positive_int
from snippets.core.compare import max_difference
from snippets.core.parts import Excerpt
from snippets.core.runtime import Spec, device, print0
from snippets.models.tiny_gpt import GPT, GPTConfig, random_batch
from snippets.parallel.context.context_parallel_gpt import (
    RingLog,
    context_parallel_gpt,
    cp_loss,
    global_loss,
    ring_elements,
    shard_batch,
)
from snippets.parallel.data.ddp import naive_allreduce_grads

SPEC = Spec(
    summary="the tiny GPT context parallel (ring attention) vs one process",
    world_size=2,
)
F64, PHASES = torch.float64, ("forward", "backward")
CFG = GPTConfig(vocab_size=64, block_size=24, n_layer=2, n_head=2, n_embd=64)


# --8<-- [start:check]
def train_against_single(cfg: GPTConfig, steps: int, group=None, b: int = 2) -> dict:
    """fp64 Adam on one process (whole sequences) and on the cp group (shards),
    compared every step; the ring's sends of the last step counted per layer."""
    cp_rank, cp, dev = dist.get_rank(group), dist.get_world_size(group), device()
    s, h = cfg.block_size, cfg.n_embd
    single, log = GPT(cfg).to(dev, F64), RingLog()
    model = context_parallel_gpt(copy.deepcopy(single), group, log)
    opts = [torch.optim.Adam(m.parameters(), lr=1e-2) for m in (single, model)]
    rows, data = [], random_batch(cfg, b, steps=steps, device=dev)
    for step, (idx, targets) in enumerate(data):
        logits, loss = single(idx, targets)  # the oracle: (b, s, V), the mean loss
        loss.backward()
        idx_r, targets_r, positions = shard_batch(idx, targets, cp_rank, cp)
        log.sends.clear()
        with log:  # counts the ring's sends, forward and backward
            logits_r, loss_r = cp_loss(model, idx_r, targets_r, positions)
            loss_r.backward()
        # mistake 2: the gradients before their all-reduce
        unreduced = max_difference(model, single, grads=True)
        naive_allreduce_grads(model, group)  # Σ over cp, ÷ cp
        worst = [abs(global_loss(loss_r, group).item() - loss.item())]
        mine = zigzag_shard(logits, cp_rank, cp, dim=1)  # this rank's rows of logits
        worst.append((logits_r - mine).detach().abs().max())
        worst.append(max_difference(model, single, grads=True))
        with torch.no_grad():  # mistake 1: the shard embedded at 0..s/cp-1
            wrong = cp_loss(model, idx_r, targets_r, torch.arange(s // cp).to(dev))[0]
        for opt in opts:
            opt.step()
            opt.zero_grad()
        worst.append(max_difference(model, single))
        worst = torch.tensor([float(w) for w in worst], dtype=F64)
        dist.all_reduce(worst, op=dist.ReduceOp.MAX, group=group)  # fail together
        # Adam divides by √v + ε, which magnifies last-bit differences in the params
        law(worst[:3].max() < 1e-12 and worst[3] < 1e-10, (step, worst.tolist()))
        keys = ("d_loss", "d_logits", "d_grads", "d_params")
        rows.append(
            {"step": step, "loss": loss.item(), **dict(zip(keys, worst.tolist()))}
        )
    gaps = torch.tensor([(wrong - logits_r).abs().max().item(), unreduced], dtype=F64)
    dist.all_reduce(gaps, op=dist.ReduceOp.MAX, group=group)
    # each mistake must miss by a million times the tolerance (at cp = 1 they are none)
    law(cp == 1 or gaps.min() > 1e-6, f"a deliberate mistake went unseen: {gaps}")
    mistakes = dict(
        zip(("positions 0..s/cp-1", "grads before all-reduce"), gaps.tolist())
    )
    comm = []
    for i in range(cfg.n_layer):
        for phase in PHASES:
            got = log.totals(f"blocks.{i}", phase)
            formula = ring_elements(cp, b, s, h, phase)
            law(got["elements"] == formula, (i, phase, got, formula))
            law(
                got["bytes"] == formula * F64.itemsize,
                "every element sent is fp64: bytes = 8 × elements",
            )  # dK, dV too: fp64 in
            comm.append({"layer": i, "phase": phase, **got, "formula": formula})
    return {"cp": cp, "steps": rows, "mistakes": mistakes, "comm": comm}


# --8<-- [end:check]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--steps", type=positive_int, default=2, help="Adam steps")


def main(steps: int = 2) -> dict:
    out = train_against_single(CFG, steps)
    cp, b, s, h = out["cp"], 2, CFG.block_size, CFG.n_embd
    said = Excerpt()  # what the note shows: the run, over the tables of its steps
    said(
        f"tiny GPT L={CFG.n_layer} H={CFG.n_head} d={h} V={CFG.vocab_size}, cp={cp}, "
        f"b={b} s={s} ({s // cp} tokens a rank)"
    )
    said("fp64 Adam, max |Δ| against one process on the whole sequence:")
    for r in out["steps"]:
        print0(
            f"  step {r['step']}: loss {r['loss']:.6f}  Δ loss {r['d_loss']:.0e}"
            f"  logits {r['d_logits']:.0e}  grads {r['d_grads']:.0e}"
            f"  params {r['d_params']:.0e}"
        )
    for name, gap in out["mistakes"].items():
        print0(f"  deliberate mistake, {name}: {gap:.1e}")
    print0("ring sends per rank, layer 0, counted at the op; elements vs formula:")
    print0(f"  {'phase':<9}{'sends':>6}{'bytes':>8}{'elements':>10}{'formula':>9}")
    names = {"forward": "(cp−1)·2·b·(s/cp)·h", "backward": "(2cp−1)·2·b·(s/cp)·h"}
    for c in out["comm"][:2]:  # layer 0; the check held for every layer
        print0(
            f"  {c['phase']:<9}{c['sends']:>6}{c['bytes']:>8,}{c['elements']:>10,}"
            f"{c['formula']:>9,}"
            f" = {names[c['phase']]} ✓"
        )
    mistakes = [{"mistake": k, "max_abs_diff": v} for k, v in out["mistakes"].items()]
    return {
        "tables": {"steps": out["steps"], "comm": out["comm"], "mistakes": mistakes},
        "excerpts": {"summary": said.lines},
        "provenance": {"backend": dist.get_backend(), "world_size": cp},
    }


if __name__ == "__main__":
    raise SystemExit(main_entry(main, SPEC))
