"""The tiny GPT, tensor parallel (Megatron-LM, Shoeybi et al. 2019, section 3): every
block's attention split by heads, its MLP by hidden units, the vocabulary by ids.

``parallelize_block(block, group)`` swaps a dense block's Linears for their parallel
halves in place, so the block's own forward runs on the slices and parameter names do
not change. Attention: q, k, v become column-parallel with H/t heads each (the head
count is read from their width) and share one ``f``, applied by a forward pre-hook on
``attn``; proj is row-parallel, ending in ``g``. MLP: fc column-parallel with its own
``f``, proj row-parallel. That is one ``f`` and one ``g`` per half: 2 all-reduces of
(b, s, h) forward and 2 backward per layer, and a ring sends 2(t−1)/t of each buffer
per rank, so 4 · 2(t−1)/t · bsh = 8·b·s·h·(t−1)/t elements per layer per step.

``tensor_parallel_gpt(model, group)`` does every block, the vocab-parallel embedding
and the tied head (the head's weight is the embedding's block of rows). Its
``forward(idx)`` returns this rank's (B, N, V/t) logits; the loss is
``vocab_parallel_cross_entropy``. Layer norms and the position embedding stay
replicated; dropout must be 0, or seeded alike on every rank.

    python -m snippets run tp_gpt          # 2 ranks; -n 4: one head each
    torchrun --nproc-per-node 2 -m snippets run tp_gpt
"""

from __future__ import annotations

import argparse
import copy
import functools
from fractions import Fraction

import torch
import torch.distributed as dist
import torch.nn as nn

from snippets.core.claims import law
from snippets.core.cli import main_entry, positive_int
from snippets.core.compare import max_difference
from snippets.core.parts import Excerpt
from snippets.core.runtime import Spec, print0
from snippets.models.tiny_gpt import GPT, Block, GPTConfig, random_batch
from snippets.parallel.tensor.tensor_parallel import (
    ColumnParallelLinear,
    CommLog,
    RowParallelLinear,
    f,
    own_block,
    tp_block_size,
)
from snippets.parallel.tensor.vocab_parallel import (
    VocabParallelEmbedding,
    vocab_parallel_cross_entropy,
)

SPEC = Spec(summary="the tiny GPT tensor parallel, vs one process", world_size=2)
F64, PHASES = torch.float64, ("forward", "backward")


# --8<-- [start:block]
class CopyInput:
    """A forward pre-hook: f on a module's input, once for all the layers inside."""

    def __init__(self, group, log: CommLog | None, tag: str):
        self.group, self.log, self.tag = group, log, tag

    def __call__(self, module: nn.Module, args: tuple) -> tuple:
        return (f(args[0], self.group, self.log, self.tag), *args[1:])


def parallelize_block(block: Block, group=None, log=None, tag="") -> Block:
    """This rank's heads and hidden units of a dense tiny_gpt Block, in place."""
    attn, mlp = block.attn, block.mlp
    tp_block_size(attn.q.out_features // attn.head_dim, group, "n_head")
    kw = {"log": log, "tag": tag}
    for name in ("q", "k", "v"):  # (d → d/t): H/t heads, one shared f
        dense = getattr(attn, name)
        cut = ColumnParallelLinear.from_dense(dense, group, copy_input=False, **kw)
        setattr(attn, name, cut)
    attn.register_forward_pre_hook(CopyInput(group, log, tag))
    attn.proj = RowParallelLinear.from_dense(attn.proj, group, **kw)  # ends in g
    mlp.fc = ColumnParallelLinear.from_dense(mlp.fc, group, **kw)  # f, d → 4d/t
    mlp.proj = RowParallelLinear.from_dense(mlp.proj, group, **kw)  # 4d/t → d, g
    return block


def tensor_parallel_gpt(model: GPT, group=None, log: CommLog | None = None) -> GPT:
    """A copy of the dense model with every block, the embedding and the head cut."""
    model = copy.deepcopy(model)
    for i, block in enumerate(model.blocks):
        parallelize_block(block, group, log, tag=f"blocks.{i}")
    tied = model.lm_head.weight is model.tok_emb.weight
    model.tok_emb = VocabParallelEmbedding.from_dense(
        model.tok_emb, group, log=log, tag="embedding"
    )
    model.lm_head = ColumnParallelLinear.from_dense(  # f on ln_f(x); logits (…, V/t)
        model.lm_head, group, log=log, tag="head"
    )
    if tied:  # the same block of rows: one parameter, both gradients summed into it
        model.lm_head.weight = model.tok_emb.weight
    return model


# --8<-- [end:block]


def tp_loss(model: GPT, idx, targets, group=None, log=None) -> torch.Tensor:
    logits, _ = model(idx)  # (B, N, V/t)
    return vocab_parallel_cross_entropy(logits, targets, group, log)


def own_part(dense: torch.Tensor, local: torch.Tensor, group=None) -> torch.Tensor:
    """The block of a dense tensor that ``local`` holds: it differs in at most one
    dimension, cut in t; a replicated tensor is the whole."""
    cut = [i for i, (a, b) in enumerate(zip(dense.shape, local.shape)) if a != b]
    return own_block(dense, group, cut[0]) if cut else dense


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--steps", type=positive_int, default=3, help="Adam steps")


# --8<-- [start:check]
def train_against_dense(cfg: GPTConfig, steps: int, group=None, b: int = 2) -> dict:
    """fp64 Adam on the dense model and its TP copy, batch (b, block_size): loss,
    logits, gradients and parameters compared each step; the collectives counted."""
    t, s, h = dist.get_world_size(group), cfg.block_size, cfg.n_embd
    dense, log = GPT(cfg).double(), CommLog()
    tp = tensor_parallel_gpt(dense, group, log)
    opts = [torch.optim.Adam(m.parameters(), lr=1e-2) for m in (dense, tp)]
    rows, mine = [], functools.partial(own_part, group=group)  # this rank's block
    for step, (idx, targets) in enumerate(random_batch(cfg, b, steps=steps)):
        log.calls.clear()
        logits, loss = dense(idx, targets)
        local_logits, _ = tp(idx)  # (B, N, V/t)
        loss_t = vocab_parallel_cross_entropy(local_logits, targets, group, log)
        loss.backward()
        loss_t.backward()
        worst = [abs(loss_t.item() - loss.item())]
        worst.append(max_difference(local_logits, logits, part=mine))
        worst.append(max_difference(tp, dense, grads=True, part=mine))
        for opt in opts:
            opt.step()
            opt.zero_grad()
        worst.append(max_difference(tp, dense, part=mine))
        worst = torch.tensor(worst, dtype=F64)
        dist.all_reduce(worst, op=dist.ReduceOp.MAX, group=group)  # fail together
        law(worst.max() < 1e-12, f"step {step}: {worst.tolist()} vs one process")
        keys = ("d_loss", "d_logits", "d_grads", "d_params")
        rows.append(
            {"step": step, "loss": loss.item(), **dict(zip(keys, worst.tolist()))}
        )
    per_layer, formula = log.sent(tag="blocks.0"), Fraction(8 * b * s * h * (t - 1), t)
    counts = [log.count(tag="blocks.0", phase=p, op="all_reduce") for p in PHASES]
    law(per_layer == formula and counts == [2, 2], (per_layer, formula, counts))
    law(
        all(log.sent(tag=f"blocks.{i}") == formula for i in range(cfg.n_layer)),
        "every layer sends what the formula says",
    )
    comm = [
        {"phase": p, "all_reduces": n, "sent": float(log.sent(tag="blocks.0", phase=p))}
        for p, n in zip(PHASES, counts)
    ]
    others = {k: float(log.sent(tag=k)) for k in ("embedding", "head", "cross_entropy")}
    sent = {"per_layer": float(per_layer), "formula": float(formula)}
    return {"steps": rows, "comm": comm, **sent, "outside_blocks": others}


# --8<-- [end:check]


def main(steps: int = 3) -> dict:
    t = dist.get_world_size()
    cfg = GPTConfig(n_head=4)  # t = 1, 2 or 4; -n 3 is refused in one line
    out = train_against_dense(cfg, steps)
    b, s, h = 2, cfg.block_size, cfg.n_embd
    said = Excerpt()  # what the note shows: the run and its count of elements sent
    said(
        f"tiny GPT H={cfg.n_head} d={h} L={cfg.n_layer} V={cfg.vocab_size}, "
        f"t={t}, b={b} s={s}, fp64 Adam {steps} steps vs one process"
    )
    for r in out["steps"]:
        print0(
            f"step {r['step']}: loss {r['loss']:.6f}  max |Δ| loss {r['d_loss']:.0e}"
            f" logits {r['d_logits']:.0e} grads {r['d_grads']:.0e}"
            f" params {r['d_params']:.0e}"
        )
    fwd, bwd = (c["all_reduces"] for c in out["comm"])
    said(f"per layer: {fwd} all-reduces forward, {bwd} backward; elements sent")
    said(
        f"per rank (ring), measured {out['per_layer']:,.0f}"
        f" = 8·b·s·h·(t−1)/t = {out['formula']:,.0f} ✓"
    )
    return {
        "tables": {"steps": out["steps"], "comm": out["comm"]},
        "excerpts": {"summary": said.lines},
        "per_layer_sent": out["per_layer"],
        "formula": out["formula"],
        "outside_blocks_sent": out["outside_blocks"],
        "provenance": {"backend": dist.get_backend(), "world_size": t},
    }


if __name__ == "__main__":
    raise SystemExit(main_entry(main, SPEC))
