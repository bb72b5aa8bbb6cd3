"""One rank's part of the 3D-parallel tiny GPT, and its part of each batch.

A rank sits at (dp_rank, pp_rank, cp_rank, tp_rank) of a :class:`Mesh`. Its model is
the dense GPT from the shared seed, cut twice:

* tensor parallel within ``tp_group`` (``tp_gpt.tensor_parallel_gpt``): H/t heads,
  4d/t hidden units, V/t rows of the tied embedding. The head's logits stay cut,
  (B, N, V/t): the model brings its own ``loss_sum``, the vocab-parallel
  cross-entropy, which the pipeline executor calls on the last stage.
* sequence parallel on top, by default (``sequence_parallel_gpt``): the blocks take
  and return (B, N/t, d), so that is what crosses a stage boundary. The executor
  sizes what a stage receives from the ids it is given, so a rank is given its N/t
  of the ids; ``embed`` gathers them over tp, embeds (the lookup is vocab parallel:
  every rank needs every id), and keeps its own rows; ``head`` gathers the rows
  back for the head's column-parallel Linear. The targets stay whole.
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
dp·b rows, and of each row the cp shard (and of the ids their N/t under sequence
parallel). Each rank's loss is the mean over its tokens, the shards are equal, so
the mean over the dp·cp ranks' gradients is the single process's gradient:
``average_gradients`` sums over ``dp_cp_group``, then divides (gloo's
``ReduceOp.AVG`` has been wrong). Under sequence parallel, a LayerNorm's gradient
on a rank is its N/t tokens' part: those are summed over ``tp_group`` first.

Mixture-of-experts blocks (``cfg.num_experts`` > 0, ``place_experts``):

* experts parallel within ``mesh.ep_group``, folded over dp
  (``ExpertParallelMoE``): a rank holds E/ep experts and routes its own tokens to
  them by all-to-all. Expert gradients are summed over ``expert_dp_group`` (the dp/ep
  replicas × cp that hold the same experts) and divided by dp·cp: each already holds
  its ep group's tokens' part, so dp·cp terms in all. The router is replicated and
  averaged with the rest.
* tensor parallel leaves the experts whole, replicated over tp: the tp cut runs with
  a dense MLP standing in for each mixture. Without sequence parallel every tp rank
  runs them on the same tokens and holds the same gradients; under it a rank runs
  its N/t tokens, and the router's and experts' gradients are summed over tp, as a
  LayerNorm's are.
* the balance loss is per sequence (``tiny_gpt.sequence_balance_loss``), so any split
  of the batch by rows (dp, micro-batches) leaves it unchanged. A rank with part of
  each sequence (cp, sequence parallel) sums its expert counts over the ranks with the
  rest, and divides its router probabilities by the N/cp tokens its loss is a mean
  over. The pipeline backpropagates only stage outputs, so a forward hook
  (``BalanceTerms``) passes each block's α·Σ losses ÷ the replica's rows into backward
  through ``AddToLoss``, Megatron-LM's ``MoEAuxLossAutoScaler``, and keeps their sum.
* no capacity: which assignments are dropped depends on which tokens share a forward
  pass, and a micro-batch on one replica is not the one process's whole batch, so
  ``place_experts`` refuses a ``capacity_factor``.
"""

from __future__ import annotations

import functools

import torch
import torch.distributed as dist
import torch.nn as nn

from snippets.attention.zigzag_layout import zigzag_shard
from snippets.core.errors import UsageError
from snippets.models.moe import MoE
from snippets.models.tiny_gpt import GPT, MLP, GPTConfig, sequence_balance_loss
from snippets.parallel.context.context_parallel_gpt import (
    context_parallel_gpt,
    shard_batch,
)
from snippets.parallel.data.ddp import naive_allreduce_grads
from snippets.parallel.experts.expert_parallel import ExpertParallelMoE
from snippets.parallel.layer_split import part
from snippets.parallel.mesh import Mesh
from snippets.parallel.tensor.sequence_parallel import (
    allreduce_sequence_grads,
    sequence_parallel_gpt,
)
from snippets.parallel.tensor.sequence_parallel_ops import (
    gather_sequence,
    gathered_linears,
    split_sequence,
)
from snippets.parallel.tensor.tp_gpt import tensor_parallel_gpt
from snippets.parallel.tensor.vocab_parallel import vocab_parallel_cross_entropy


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
def vocab_parallel_sum(logits, targets, group=None) -> torch.Tensor:
    """Σ cross-entropy over (…, V/t) logits, for the executor: never gathered."""
    return vocab_parallel_cross_entropy(logits, targets, group) * targets.numel()


def sequence_parallel_embed(model: GPT, ids, positions=None, group=None):
    """(B, N/t) ids → (B, N/t, d): every id over tp, embedded, this rank's rows."""
    every = gather_sequence(ids, group)  # (B, N): integers, no gradient
    return split_sequence(GPT.embed(model, every, positions), group)


def sequence_parallel_head(model: GPT, x: torch.Tensor, group=None) -> torch.Tensor:
    """(B, N/t, d) → logits (B, N, V/t): ln_f on the rows, gathered, then lm_head."""
    return gathered_linears(model.ln_f(x), (model.lm_head,), group)[0]


def rank_model(
    cfg: GPTConfig, mesh: Mesh, v: int = 1, dtype=torch.float64, seed: int = 0,
    device: torch.device | str = "cpu", sequence_parallel: bool = True,
    rows: int = 1,
) -> GPT:  # fmt: skip
    """The dense GPT from ``seed``, cut over ``mesh.tp_group`` (and its sequence,
    if ``sequence_parallel``), its attention a ring over ``mesh.cp_group``, then
    reduced to the blocks, embeddings and head of this rank's pipeline stages; its
    experts split over ``mesh.ep_group`` (``rows``: the replica's batch rows)."""
    model, positions = GPT(cfg, seed).to(device, dtype), None
    sp = sequence_parallel and mesh.tp > 1
    if mesh.tp > 1:
        tp = mesh.tp_group
        cut = sequence_parallel_gpt if sp else tensor_parallel_gpt
        model = (
            cut_around_experts(cut, model, tp) if cfg.num_experts else cut(model, tp)
        )
        model.loss_sum = functools.partial(vocab_parallel_sum, group=tp)
    if mesh.cp > 1:
        model = context_parallel_gpt(model, mesh.cp_group)
        every = torch.arange(cfg.block_size, device=device)  # (N,)
        positions = zigzag_shard(every, mesh.cp_rank, mesh.cp, -1)  # (N/cp,)
    if sp:
        embed = functools.partial(sequence_parallel_embed, group=tp)
        model.head = functools.partial(sequence_parallel_head, model, group=tp)
    else:
        embed = GPT.embed
    if sp or mesh.cp > 1:  # the executor calls embed(ids), without positions
        model.embed = functools.partial(embed, model, positions=positions)
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
    if cfg.num_experts:
        place_experts(model, mesh, sp, rows)
    return model


# --8<-- [end:model]


# --8<-- [start:experts]
def cut_around_experts(cut, model: GPT, group) -> GPT:
    """``cut`` (tensor or sequence parallel) of everything but the experts: each
    mixture leaves its block while a dense MLP stands in, and comes back whole."""
    mixtures, w = [b.mlp for b in model.blocks], model.tok_emb.weight
    with torch.random.fork_rng(devices=[]):  # the stand-ins' init draws nothing
        for b in model.blocks:
            b.mlp = MLP(model.config).to(w.device, w.dtype)
    model = cut(model, group)
    for b, moe in zip(model.blocks, mixtures):
        b.mlp = moe
    return model


class AddToLoss(torch.autograd.Function):
    """y passes unchanged; backward gives ``term`` the gradient 1, as if it had been
    added to the loss (Megatron-LM's MoEAuxLossAutoScaler)."""

    @staticmethod
    def forward(ctx, y: torch.Tensor, term: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(term)
        return y.view_as(y)

    @staticmethod
    def backward(ctx, dy: torch.Tensor):
        return dy, torch.ones_like(ctx.saved_tensors[0])


class BalanceTerms:
    """A forward hook on each mixture-of-experts block: α · Σ of the block's (b_j,)
    balance losses ÷ the replica's rows b is the micro-batch's share of α · mean,
    as the executor's cross-entropy is Σ ÷ the replica's tokens."""

    def __init__(self, coef: float, rows: int):
        self.weight, self.total = coef / rows, 0.0  # total: this rank's share, a step

    def __call__(self, block: nn.Module, args: tuple, y: torch.Tensor):
        term = self.weight * block.aux_loss.sum()
        self.total = self.total + term.detach()
        return AddToLoss.apply(y, term)


def sum_counts(counts: torch.Tensor, groups: list) -> torch.Tensor:
    """Expert counts (B, E) of this rank's tokens → of every shard of the sequences."""
    for group in groups:
        dist.all_reduce(counts, group=group)
    return counts


def place_experts(model: GPT, mesh: Mesh, sp: bool, rows: int) -> None:
    """The kept blocks' experts over ``ep_group``; the balance loss counted over the
    ranks that hold the rest of each sequence, and hooked into backward."""
    cfg = model.config
    if cfg.capacity_factor is not None:
        raise UsageError(
            f"capacity factor {cfg.capacity_factor}: drops would count a micro-batch "
            "of one replica, not the whole batch; use None (no drops)"
        )
    shards = [g for g, on in ((mesh.cp_group, mesh.cp > 1), (mesh.tp_group, sp)) if on]
    balance = functools.partial(
        sequence_balance_loss,
        tokens=cfg.block_size // mesh.cp,  # a rank's loss is a mean over N/cp
        count_all=functools.partial(sum_counts, groups=shards),
    )
    model.balance = BalanceTerms(cfg.aux_loss_coef, rows)
    for block in model.blocks:
        if isinstance(block, nn.Identity):  # another stage's
            continue
        if mesh.ep > 1:
            block.mlp = ExpertParallelMoE.from_dense(block.mlp, mesh.ep_group)
        block.balance_loss = balance
        block.register_forward_hook(model.balance)


# --8<-- [end:experts]


# --8<-- [start:expert_grads]
def reduce_grads(params: list, group, divisor: int) -> None:
    """Σ over ``group``, ÷ ``divisor``. An expert no token of a rank reached has no
    gradient there: it counts as 0, and stays None where no rank has one (Adam then
    skips it, as it does in one process)."""
    if not params:
        return
    have = [p.grad is not None for p in params]
    have = torch.tensor(have, dtype=torch.int32, device=params[0].device)
    dist.all_reduce(have, group=group)  # then every rank makes the same calls
    for p, n in zip(params, have.tolist()):
        if n:
            p.grad = torch.zeros_like(p) if p.grad is None else p.grad
            dist.all_reduce(p.grad, group=group)
            p.grad.div_(divisor)


def average_expert_gradients(model: nn.Module, mesh: Mesh, sp: bool) -> None:
    """average_gradients with mixtures of experts: under sequence parallel the
    routers and experts summed over tp with the LayerNorms; then the experts summed
    over ``expert_dp_group``, everything else over ``dp_cp_group``, each ÷ dp·cp."""
    layers = [m for m in model.modules() if isinstance(m, (MoE, ExpertParallelMoE))]
    experts = [p for m in layers for p in m.experts.parameters()]
    if mesh.tp > 1:
        allreduce_sequence_grads(model, mesh.tp_group)
    if sp:
        routers = [p for m in layers for p in m.router.parameters()]
        reduce_grads([*routers, *experts], mesh.tp_group, 1)
    mine = {id(p) for p in experts}
    shared = [p for p in model.parameters() if id(p) not in mine]
    reduce_grads(shared, mesh.dp_cp_group, mesh.dp * mesh.cp)
    reduce_grads(experts, mesh.expert_dp_group, mesh.dp * mesh.cp)


# --8<-- [end:expert_grads]


# --8<-- [start:data]
def rank_batch(
    idx: torch.Tensor, targets: torch.Tensor, mesh: Mesh, sequence_parallel=True
) -> tuple[torch.Tensor, torch.Tensor]:
    """This rank's part of a global (dp·b, N) batch: (b, N/cp) ids and targets; under
    sequence parallel (and tp > 1) the ids are this tp rank's (b, N/(cp·t))."""
    idx, targets = (t.chunk(mesh.dp)[mesh.dp_rank] for t in (idx, targets))
    if mesh.cp > 1:
        idx, targets = shard_batch(idx, targets, mesh.cp_rank, mesh.cp)[:2]
    if sequence_parallel and mesh.tp > 1:
        idx = idx.chunk(mesh.tp, dim=1)[mesh.tp_rank]  # what stage 0 gathers again
    return idx, targets


def average_gradients(model: nn.Module, mesh: Mesh, sequence_parallel=True) -> None:
    """Σ over tp of the sequence-parallel partial gradients; then Σ over the
    replicas that hold the same parameters, ÷ their number."""
    if getattr(model, "balance", None) is not None:  # mixtures of experts
        sp = sequence_parallel and mesh.tp > 1
        return average_expert_gradients(model, mesh, sp)
    if mesh.tp > 1:  # only parameters marked sequence_parallel
        allreduce_sequence_grads(model, mesh.tp_group)
    if mesh.dp * mesh.cp > 1:
        naive_allreduce_grads(model, mesh.dp_cp_group)


# --8<-- [end:data]
