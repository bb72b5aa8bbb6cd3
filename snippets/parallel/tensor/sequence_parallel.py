"""Sequence parallelism (Korthikanti et al. 2022, section 4.2.2) on top of tensor
parallelism: the parts of a layer that tensor parallelism leaves replicated (the layer
norms, dropout, the residual adds) run on N/t of the sequence instead.

Between the regions the residual stream (B, N/t, d) is cut along N. Before attention
and before the MLP, ``gather_sequence`` (all-gather) rebuilds (B, N, d) for the
column-parallel Linears; after the row-parallel Linear, ``scatter_sequence``
(reduce-scatter) sums the partial products and cuts them along N in one collective,
where tensor parallelism all-reduces. An all-reduce is a reduce-scatter plus an
all-gather, so the bytes are the same; the gathered inputs are not kept (the
Linears save the shard and gather again in backward: 2 all-gathers more per layer).

A layer norm weight, and a bias added after the reduce-scatter, now sees only N/t
tokens on each rank: its gradient is a partial sum that ``allreduce_sequence_grads``
adds up over the group after backward (Megatron-LM's ``_allreduce_layernorm_grads``).
Those parameters are marked ``p.sequence_parallel = True``.

    python -m snippets run sequence_parallel       # 2 ranks; -n 4
    torchrun --nproc-per-node 2 -m snippets run sequence_parallel
"""

from __future__ import annotations

import copy

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

from snippets.core.claims import law
from snippets.core.cli import main_entry
from snippets.core.compare import max_difference
from snippets.core.parts import Excerpt
from snippets.core.runtime import Spec
from snippets.models.tiny_gpt import GPT, Block, GPTConfig, random_batch
from snippets.parallel.tensor import sequence_parallel_memory as memory
from snippets.parallel.tensor.sequence_parallel_ops import (
    gathered_linears,
    scatter_sequence,
    split_sequence,
)
from snippets.parallel.tensor.tensor_parallel import (
    ColumnParallelLinear,
    CommLog,
    RowParallelLinear,
    tp_block_size,
)
from snippets.parallel.tensor.tp_gpt import own_part, tensor_parallel_gpt
from snippets.parallel.tensor.vocab_parallel import (
    VocabParallelEmbedding,
    vocab_parallel_cross_entropy,
)

SPEC = Spec(summary="sequence parallel: bytes and saved activations", world_size=2)


# --8<-- [start:regions]
class ScatteredRowParallelLinear(RowParallelLinear):
    """Row-parallel, but ḡ (reduce-scatter along N) in place of g (all-reduce)."""

    def reduce(self, partial: torch.Tensor) -> torch.Tensor:  # (B, N, n) partial
        return scatter_sequence(partial, self.group, self.log, self.tag)  # (B, N/t, n)


class SequenceParallelAttention(nn.Module):
    """The tiny GPT's attention on a shard (B, N/t, d): the same names and slices as
    tensor parallel (q, k, v, proj), H/t heads over the whole sequence."""

    def __init__(self, attn: nn.Module, group=None, log=None, tag=""):
        super().__init__()
        tp_block_size(attn.q.out_features // attn.head_dim, group, "n_head")
        kw = {"copy_input": False, "log": log, "tag": tag}
        self.q, self.k, self.v = (
            ColumnParallelLinear.from_dense(lin, group, **kw)
            for lin in (attn.q, attn.k, attn.v)
        )
        self.proj = ScatteredRowParallelLinear.from_dense(
            attn.proj, group, log=log, tag=tag
        )
        self.drop, self.attention, self.head_dim = (
            attn.drop,
            attn.attention,
            attn.head_dim,
        )
        self.group, self.log, self.tag = group, log, tag

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, N/t, d) → (B, N/t, d)
        linears = (self.q, self.k, self.v)
        q, k, v = gathered_linears(x, linears, self.group, self.log, self.tag)
        B, N, width = q.shape  # (B, N, d/t): the whole sequence, H/t heads

        def heads(y: torch.Tensor) -> torch.Tensor:  # → (B, H/t, N, d/H)
            return y.view(B, N, width // self.head_dim, self.head_dim).transpose(1, 2)

        a = self.attention(heads(q), heads(k), heads(v)).transpose(1, 2).flatten(2)
        return self.drop(self.proj(a))  # reduce-scatter: (B, N/t, d)


class SequenceParallelMLP(nn.Module):
    def __init__(self, mlp: nn.Module, group=None, log=None, tag=""):
        super().__init__()
        kw = {"log": log, "tag": tag}
        self.fc = ColumnParallelLinear.from_dense(mlp.fc, group, copy_input=False, **kw)
        self.proj = ScatteredRowParallelLinear.from_dense(mlp.proj, group, **kw)
        self.drop, self.group, self.log, self.tag = mlp.drop, group, log, tag

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, N/t, d) → (B, N/t, d)
        (h,) = gathered_linears(x, (self.fc,), self.group, self.log, self.tag)
        return self.drop(self.proj(F.gelu(h)))  # h: (B, N, 4d/t)


def sequence_parallel_block(block: Block, group=None, log=None, tag="") -> Block:
    """A dense tiny_gpt Block, in place, taking and returning (B, N/t, d)."""
    block.attn = SequenceParallelAttention(block.attn, group, log, tag)
    block.mlp = SequenceParallelMLP(block.mlp, group, log, tag)
    for p in [*block.ln1.parameters(), *block.ln2.parameters()]:
        p.sequence_parallel = True
    for p in (block.attn.proj.bias, block.mlp.proj.bias):
        if p is not None:
            p.sequence_parallel = True
    return block


def allreduce_sequence_grads(model: nn.Module, group=None, log=None) -> None:
    """After backward: Σ over the group of each N/t-partial gradient."""
    for p in model.parameters():
        if getattr(p, "sequence_parallel", False) and p.grad is not None:
            dist.all_reduce(p.grad, op=dist.ReduceOp.SUM, group=group)
            if log is not None:
                log.record("all_reduce", "grads", "sequence_grads", p.grad, group)


# --8<-- [end:regions]


# --8<-- [start:gpt]
def sequence_parallel_gpt(model: GPT, group=None, log: CommLog | None = None) -> GPT:
    """A copy of the dense model: vocab-parallel embedding and head, SP blocks."""
    model = copy.deepcopy(model)
    for i, block in enumerate(model.blocks):
        sequence_parallel_block(block, group, log, tag=f"blocks.{i}")
    for p in model.ln_f.parameters():
        p.sequence_parallel = True
    tied = model.lm_head.weight is model.tok_emb.weight
    model.tok_emb = VocabParallelEmbedding.from_dense(model.tok_emb, group, log=log)
    model.lm_head = ColumnParallelLinear.from_dense(model.lm_head, group, log=log)
    if tied:
        model.lm_head.weight = model.tok_emb.weight
    return model


def sp_logits(model: GPT, idx, group=None, log=None) -> torch.Tensor:
    """(B, N) ids → this rank's (B, N, V/t) logits; the blocks run on N/t."""
    tp_block_size(idx.shape[1], group, "sequence length")
    x = split_sequence(model.embed(idx), group, log, "embedding")  # (B, N/t, d)
    for block in model.blocks:
        x = block(x)
    (logits,) = gathered_linears(model.ln_f(x), (model.lm_head,), group, log, "head")
    return logits


# --8<-- [end:gpt]


def main() -> dict:
    t = dist.get_world_size()
    cfg = GPTConfig(n_head=4)  # t = 1, 2 or 4; N = 16 is cut in t too
    dense = GPT(cfg).double()
    b, s, h = 2, cfg.block_size, cfg.n_embd
    idx, targets = random_batch(cfg, b)
    loss = dense(idx, targets)[1]
    loss.backward()
    logs = {"tp": CommLog(), "sp": CommLog()}
    tp = tensor_parallel_gpt(dense, None, logs["tp"])
    sp = sequence_parallel_gpt(dense, None, logs["sp"])
    loss_tp = vocab_parallel_cross_entropy(tp(idx)[0], targets, None, logs["tp"])
    logits_sp = sp_logits(sp, idx, None, logs["sp"])
    loss_sp = vocab_parallel_cross_entropy(logits_sp, targets, None, logs["sp"])
    loss_tp.backward()
    loss_sp.backward()
    allreduce_sequence_grads(sp, None, logs["sp"])
    worst = [max_difference(m, dense, grads=True, part=own_part) for m in (tp, sp)]
    worst += [abs(x.item() - loss.item()) for x in (loss_tp, loss_sp)]
    worst = torch.tensor(worst, dtype=torch.float64)
    dist.all_reduce(worst, op=dist.ReduceOp.MAX)
    law(worst.max() < 1e-12, worst.tolist())
    comm = memory.comm_rows(logs, b, s, h, t)  # before compare() runs blocks again
    rows = memory.compare(dense, tp, sp, b, s, cfg, group=None)
    said = Excerpt()  # what the note shows: the run and its differences
    said(f"tiny GPT H={cfg.n_head} d={h} L={cfg.n_layer}, b={b} s={s}, t={t}")
    said(
        f"vs one process, max |Δ|: gradients TP {worst[0]:.0e}, SP {worst[1]:.0e};"
        f" loss TP {worst[2]:.0e}, SP {worst[3]:.0e}"
    )
    memory.print_tables(rows, comm)
    return {
        "tables": {"activations": rows, "comm": comm},
        "excerpts": {"summary": said.lines},
        "max_abs_diff": worst.tolist(),
        "provenance": {"backend": dist.get_backend(), "world_size": t},
    }


if __name__ == "__main__":
    raise SystemExit(main_entry(main, SPEC))
