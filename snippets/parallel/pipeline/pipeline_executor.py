"""Run a schedule's action lists on the ranks of a process group, with the tiny GPT
cut into p·v stages, and stamp every action.

Each rank builds the whole model from one seed and runs only its stages: stage s is
``layer_split.run_stage`` of s out of p·v (the embeddings on the first, its blocks,
the head on the last). The group is an argument, never a global: rank ``pp_rank`` of
``group`` runs ``schedule(name, p, m, v)[pp_rank]``.

* F receives the activation (B_j, N, d) from stage s - 1, or reads the token ids on
  stage 0; the last stage turns logits into Σ cross-entropy / (B·N), so the losses of
  the m micro-batches add up to the mean over the whole batch, whatever their sizes
  (a model with its own ``loss_sum``, e.g. vocab parallel, computes the Σ itself).
* B receives ∂L/∂output from stage s + 1 and sends ∂L/∂input to stage s - 1. A plan
  without W does the whole backward here; with W, every Linear's weight gradient is
  deferred (``pipeline_weight_grad``) and W runs it.
* Sends are posted (``isend``) and waited on at the end; receives block. Every message
  has its own tag, so the order two ranks post them in never matters.
* The tied embedding (``tok_emb`` = ``lm_head``) gets gradient on the first stage and
  on the last; the two ranks swap their parts and add, so both hold the sum.

The stamps are ``time.perf_counter_ns`` after a barrier: when the rank began to wait
for the action's input, when the input was there, when the action ended.
"""

from __future__ import annotations

import time
from contextlib import nullcontext
from dataclasses import dataclass, field

import torch
import torch.distributed as dist
import torch.nn.functional as F

from snippets.core.errors import UsageError
from snippets.models.tiny_gpt import GPT
from snippets.parallel.layer_split import activation, run_stage
from snippets.parallel.pipeline.pipeline_activations import LiveActivations
from snippets.parallel.pipeline.pipeline_schedules import Action, schedule, stage
from snippets.parallel.pipeline.pipeline_weight_grad import (
    WeightGradients,
    split_backward,
)

SUM = {"reduction": "sum"}


@dataclass
class PipelineRun:
    loss: torch.Tensor | None  # Σ over micro-batches, on the last stage's rank
    stamps: list[dict] = field(default_factory=list)  # one per action, in order
    peak_in_flight: int = 0  # most micro-batch-chunks whose activations were saved


def check_sizes(model: GPT, p: int, m: int, v: int, rows: int) -> None:
    if model.config.n_layer < p * v:
        raise UsageError(
            f"{p * v} stages need at least {p * v} blocks, the model has "
            f"{model.config.n_layer}: use fewer ranks or chunks"
        )
    if not 1 <= m <= rows:
        raise UsageError(f"m={m} micro-batches need 1..{rows}, the batch's rows")


def tied_gradient_sum(model: GPT, p: int, pp_rank: int, group) -> None:
    """First and last stage: swap their parts of the tied weight's gradient, add."""
    if not model.config.tie_embeddings or p == 1 or pp_rank not in (0, p - 1):
        return
    w = model.tok_emb.weight
    mine = w.grad if w.grad is not None else torch.zeros_like(w)
    theirs = torch.empty_like(mine)
    peer = p - 1 - pp_rank
    work = dist.isend(mine.clone(), group=group, group_dst=peer)
    dist.recv(theirs, group=group, group_src=peer)
    work.wait()
    w.grad = mine + theirs if pp_rank == 0 else theirs + mine  # the same order


def loss_sum(model: GPT, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Σ cross-entropy over a micro-batch's tokens; a model that brings its own
    ``loss_sum(logits, targets)`` (vocab parallel: logits cut over tp) uses it."""
    own = getattr(model, "loss_sum", None)
    if own is not None:
        return own(logits, targets)
    return F.cross_entropy(logits.flatten(0, 1), targets.flatten(), **SUM)


# --8<-- [start:execute]
def execute(
    model: GPT,
    name: str,
    idx: torch.Tensor,
    targets: torch.Tensor,
    m: int,
    v: int = 1,
    group: dist.ProcessGroup | None = None,
) -> PipelineRun:
    """Run schedule `name` on this rank of `group`; idx, targets: (B, N) token ids."""
    pp_rank, p = dist.get_rank(group), dist.get_world_size(group)
    check_sizes(model, p, m, v, idx.shape[0])
    plan, S = schedule(name, p, m, v)[pp_rank], p * v
    ids, tgt = idx.tensor_split(m), targets.tensor_split(m)  # (B_j, N) each
    store, live, run = WeightGradients(), LiveActivations(), PipelineRun(None)
    deferred = any(a.kind == "W" for a in plan)
    held: dict = {}  # (chunk, j) → (stage input, stage output or loss)
    mailbox: dict = {}  # messages this rank sends itself (p = 1)
    sends: list = []

    def tag(kind: str, s: int, j: int) -> int:  # one tag per message
        return 2 * (s * m + j) + (kind == "B")

    def receive(kind: str, s: int, j: int, like: torch.Tensor) -> torch.Tensor:
        src = (s - 1 if kind == "F" else s + 1) % p
        if src == pp_rank:
            return mailbox.pop(tag(kind, s, j))
        buf = torch.empty_like(like)
        dist.recv(buf, group=group, group_src=src, tag=tag(kind, s, j))
        return buf

    def send(kind: str, s: int, j: int, t: torch.Tensor) -> None:
        to = s + 1 if kind == "F" else s - 1  # the stage that receives it
        if to % p == pp_rank:
            mailbox[tag(kind, to, j)] = t.detach()
        else:  # the tensor is kept until the send is waited on
            t = t.detach().contiguous()
            work = dist.isend(t, group=group, group_dst=to % p, tag=tag(kind, to, j))
            sends.append((work, t))

    def act(a: Action, s: int, j: int, key: tuple) -> int:
        """Run one action; return when its input was there (ns)."""
        if a.kind == "F":
            x = ids[j] if s == 0 else receive("F", s, j, activation(model, ids[j]))
            x.requires_grad_(s > 0)
            started = time.perf_counter_ns()
            store.key = key
            with live.saving(key):
                y = run_stage(model, s, S, x)  # (B_j, N, d), or logits on the last
                if s == S - 1:  # this micro-batch's share of the batch's mean loss
                    y = loss_sum(model, y, tgt[j]) / targets.numel()
                    run.loss = y.detach() + (0 if run.loss is None else run.loss)
            held[key] = (x, y)
            if s < S - 1:
                send("F", s, j, y)
        elif a.kind == "B":
            x, y = held[key]
            dy = None if s == S - 1 else receive("B", s, j, y)
            started = time.perf_counter_ns()
            torch.autograd.backward(y, dy, retain_graph=deferred)
            if s > 0:
                send("B", s, j, x.grad)
            if not deferred:
                del held[key]  # the graph is freed: its activations go
        else:
            started = time.perf_counter_ns()
            store.run(key)
            del held[key]
        return started

    dist.barrier(group=group)
    t0 = time.perf_counter_ns()
    with split_backward(model, store) if deferred else nullcontext():
        for a in plan:
            s, j = stage(a, p, pp_rank), a.microbatch
            waited = time.perf_counter_ns()
            started = act(a, s, j, (a.chunk, j))
            ended = time.perf_counter_ns()
            run.peak_in_flight = live.sample()
            run.stamps.append({"kind": a.kind, "microbatch": j, "chunk": a.chunk,
                               "stage": s, "wait": waited - t0,
                               "start": started - t0, "end": ended - t0})  # fmt: skip
    for work, _ in sends:
        work.wait()
    tied_gradient_sum(model, p, pp_rank, group)
    return run


# --8<-- [end:execute]
