"""The overview's tensor parallelism (Megatron-LM, Shoeybi et al. 2019): every block of
the GPT cut by attention heads and by MLP hidden units, one all-reduce after each half.

Built by replacing a dense block's Linears in place, so the block's own code runs on the
slices: q, k, v and mlp.fc keep the rows of this rank's heads and hidden units (the
paper's column split of A, since torch stores Aᵀ), attn.proj and mlp.proj the matching
columns (the row split of B). Dropout must be 0: a partial sum cannot be dropped out.
The layers a real model uses, ``ColumnParallelLinear`` and ``RowParallelLinear``, are
``tensor_parallel``.
"""

from __future__ import annotations

import copy

import torch
import torch.distributed as dist
import torch.nn as nn

from snippets.models.tiny_gpt import Block
from snippets.parallel.layer_split import part
from snippets.parallel.tensor.tensor_parallel import f, g


# --8<-- [start:tensor]
class SummedSlices(nn.Module):
    """Megatron's f (identity forward, all-reduce backward), a dense module whose
    Linears hold this rank's slices, g (all-reduce forward), then the output bias that
    the slices left out (added once, after the sum). f and g come from
    ``tensor_parallel``."""

    def __init__(self, inner: nn.Module, bias: nn.Parameter | None, group=None):
        super().__init__()
        self.inner, self.bias, self.group = inner, bias, group

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, N, d), same on all ranks
        y = self.inner(f(x, self.group))  # partial (B, N, d)
        y = g(y, self.group)  # Σ over ranks
        return y if self.bias is None else y + self.bias


def keep_rows(linear: nn.Linear, rows: range) -> nn.Linear:
    """Output features `rows` of a Linear: weight (len, in), bias (len,)."""
    cut = nn.Linear(linear.in_features, len(rows), bias=linear.bias is not None)
    r = slice(rows.start, rows.stop)
    cut.weight = nn.Parameter(linear.weight.detach()[r].clone())
    if linear.bias is not None:
        cut.bias = nn.Parameter(linear.bias.detach()[r].clone())
    return cut.to(linear.weight.device)


def keep_columns(linear: nn.Linear, cols: range) -> tuple[nn.Linear, nn.Parameter]:
    """Input features `cols` of a Linear, without its bias; and the bias, kept apart."""
    cut = nn.Linear(len(cols), linear.out_features, bias=False)
    cut.weight = nn.Parameter(linear.weight.detach()[:, cols.start : cols.stop].clone())
    bias = None if linear.bias is None else nn.Parameter(linear.bias.detach().clone())
    return cut.to(linear.weight.device), bias


def weight_split_block(dense: Block, group: dist.ProcessGroup | None = None) -> Block:
    """This rank's share of a tiny_gpt Block: its heads of the attention and its hidden
    units of the MLP; layer norms replicated. Sets .heads and .hidden (ranges)."""
    rank, p = dist.get_rank(group), dist.get_world_size(group)
    block = copy.deepcopy(dense)
    attn, mlp, hd = block.attn, block.mlp, dense.attn.head_dim
    block.heads = part(dense.attn.q.out_features // hd, p, rank, "heads")
    rows = range(block.heads.start * hd, block.heads.stop * hd)  # of q, k, v
    attn.q, attn.k, attn.v = (keep_rows(lin, rows) for lin in (attn.q, attn.k, attn.v))
    attn.proj, bias = keep_columns(attn.proj, rows)
    block.attn = SummedSlices(attn, bias, group)  # 1 all-reduce forward, 1 backward
    block.hidden = part(mlp.fc.out_features, p, rank, "hidden units")
    mlp.fc = keep_rows(mlp.fc, block.hidden)
    mlp.proj, bias = keep_columns(mlp.proj, block.hidden)
    block.mlp = SummedSlices(mlp, bias, group)  # and again
    return block


# --8<-- [end:tensor]


def dense_parts(block: Block) -> dict[str, tuple[str, tuple[slice, ...]]]:
    """For each parameter of a weight-split block: the name of the dense block's
    parameter it came from, and the index of the part it holds (for checks)."""
    hd = block.attn.inner.head_dim
    r = slice(block.heads.start * hd, block.heads.stop * hd)
    c = slice(block.hidden.start, block.hidden.stop)
    where = {f"attn.inner.{n}": (f"attn.{n}", (r,)) for n in "qkv"}
    where["attn.inner.proj"] = ("attn.proj", (slice(None), r))
    where["mlp.inner.fc"] = ("mlp.fc", (c,))
    where["mlp.inner.proj"] = ("mlp.proj", (slice(None), c))
    parts = {}
    for name, _ in block.named_parameters():
        module, leaf = name.rsplit(".", 1)
        if module in where:
            parts[name] = (f"{where[module][0]}.{leaf}", where[module][1])
        elif name in ("attn.bias", "mlp.bias"):  # kept apart by keep_columns
            parts[name] = (f"{module}.proj.bias", (slice(None),))
        else:  # layer norms: replicated
            parts[name] = (name, (slice(None),))
    return parts
