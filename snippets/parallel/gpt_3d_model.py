"""One rank's part of the 3D-parallel tiny GPT, and its part of each batch.

A rank sits at (dp_rank, pp_rank, cp_rank, tp_rank) of a :class:`Mesh`. Its model is
the dense GPT from the shared seed, cut twice:

* tensor parallel within ``tp_group`` (``tp_gpt.tensor_parallel_gpt``): H/t heads,
  4d/t hidden units, V/t rows of the tied embedding. The pipeline executor computes
  a dense cross-entropy on the last stage, so the head all-gathers its (B, N, V/t)
  logits (``gather_output``); the gather's backward keeps this rank's block.
* pipeline parallel within ``pp_group``: the executor runs stage c·p + pp_rank of
  p·v for each chunk c, and only those stages' blocks stay; the others become
  ``nn.Identity``. The embeddings stay where stage 0 runs, the final norm and head
  where the last stage runs; the tied weight lives on both, and the executor sums
  its two gradients. A rank with neither keeps a 0-row stand-in of ``tok_emb`` (a
  buffer, not a parameter): the executor reads its dtype to allocate the activations
  it receives.

* context parallel within ``cp_group`` (``context_parallel_gpt``): every attention
  becomes ring attention, and ``embed`` adds the positions of this rank's zig-zag
  shard (chunks r and 2cp−1−r of a ``block_size`` sequence), not 0..N/cp−1: the
  executor calls ``embed(ids)`` with no positions.

Its data (``rank_batch``): rows [dp_rank·b, (dp_rank+1)·b) of the global batch of
dp·b rows, and of each row the cp shard. Each rank's loss is the mean over its
tokens, the shards are equal, so the mean over the dp·cp ranks' gradients is the
single process's gradient: ``average_gradients`` sums over ``dp_cp_group``, then
divides (gloo's ``ReduceOp.AVG`` has been wrong).
"""

from __future__ import annotations

import functools

import torch
import torch.nn as nn

from snippets.attention.zigzag_layout import zigzag_shard
from snippets.models.tiny_gpt import GPT, GPTConfig
from snippets.parallel.context_parallel_gpt import context_parallel_gpt, shard_batch
from snippets.parallel.ddp import naive_allreduce_grads
from snippets.parallel.layer_split import part
from snippets.parallel.mesh import Mesh
from snippets.parallel.tp_gpt import tensor_parallel_gpt


# --8<-- [start:stages]
def rank_stages(p: int, v: int, pp_rank: int) -> list[int]:
    """The pipeline stages rank pp_rank runs: chunk c is stage c·p + pp_rank."""
    return [c * p + pp_rank for c in range(v)]


def rank_blocks(n_layer: int, p: int, v: int, pp_rank: int) -> list[int]:
    """The blocks of those stages, cut as the executor's ``run_stage`` cuts them."""
    S = p * v
    return [
        i for s in rank_stages(p, v, pp_rank) for i in part(n_layer, S, s, "blocks")
    ]


# --8<-- [end:stages]


class DtypeOnly(nn.Module):
    """An empty (0, d) weight of the dtype and device of the one it replaces."""

    def __init__(self, like: torch.Tensor):
        super().__init__()
        self.register_buffer("weight", like.detach()[:0].clone())


# --8<-- [start:model]
def rank_model(
    cfg: GPTConfig, mesh: Mesh, v: int = 1, dtype=torch.float64, seed: int = 0,
    device: torch.device | str = "cpu",
) -> GPT:  # fmt: skip
    """The dense GPT from ``seed``, cut over ``mesh.tp_group``, its attention a ring
    over ``mesh.cp_group``, then reduced to the blocks, embeddings and head of this
    rank's pipeline stages."""
    model = GPT(cfg, seed).to(device, dtype)
    if mesh.tp > 1:
        model = tensor_parallel_gpt(model, mesh.tp_group)
        model.lm_head.gather_output = True  # logits (B, N, V) for the executor's loss
    if mesh.cp > 1:
        model = context_parallel_gpt(model, mesh.cp_group)
        every = torch.arange(cfg.block_size, device=device)  # (N,)
        mine = zigzag_shard(every, mesh.cp_rank, mesh.cp, -1)
        model.embed = functools.partial(GPT.embed, model, positions=mine)  # (N/cp,)
    S, stages = mesh.pp * v, rank_stages(mesh.pp, v, mesh.pp_rank)
    keep = set(rank_blocks(cfg.n_layer, mesh.pp, v, mesh.pp_rank))
    for i in range(cfg.n_layer):
        if i not in keep:
            model.blocks[i] = nn.Identity()
    first, last = 0 in stages, S - 1 in stages
    if not first:
        model.pos_emb = None
    if not last:
        model.ln_f = model.lm_head = None
    if not first and not (last and cfg.tie_embeddings):
        model.tok_emb = DtypeOnly(model.tok_emb.weight)
    return model


# --8<-- [end:model]


# --8<-- [start:data]
def rank_batch(
    idx: torch.Tensor, targets: torch.Tensor, mesh: Mesh
) -> tuple[torch.Tensor, torch.Tensor]:
    """This rank's part of a global (dp·b, N) batch: (b, N/cp) ids and targets."""
    idx, targets = (t.chunk(mesh.dp)[mesh.dp_rank] for t in (idx, targets))
    if mesh.cp == 1:
        return idx, targets
    return shard_batch(idx, targets, mesh.cp_rank, mesh.cp)[:2]


def average_gradients(model: nn.Module, mesh: Mesh) -> None:
    """Σ over the replicas that hold the same parameters, ÷ their number."""
    if mesh.dp * mesh.cp > 1:
        naive_allreduce_grads(model, mesh.dp_cp_group)


# --8<-- [end:data]
