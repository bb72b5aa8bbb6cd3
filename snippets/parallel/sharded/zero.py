"""ZeRO by hand: shard the optimizer state (stage 1), the gradients too (stage 2), and
the parameters too (stage 3) over the data-parallel ranks (Rajbhandari et al. 2020).

``shard(module, torch.optim.Adam, stage, lr=…)`` returns the module and an optimizer
whose ``step()`` and ``zero_grad()`` train it; the training equals one process on the
concatenated batch. Every trainable parameter is cut into N chunks
(:mod:`snippets.parallel.sharded.zero_shards`); the inner optimizer only ever sees this
rank's chunks, so its state is 1/N of the model's.

* Stage 1: backward fills full gradients as usual; ``step()`` reduce-scatters each
  (Σ, then ÷ N), steps the chunks, all-gathers the parameters. 2Ψ per step.
  ``zero1_step(params, state, lr, momentum)`` is that step with SGD as one function,
  its pieces and optimizer kept in ``state`` between calls.
* Stage 2: the reduce-scatter runs in a post-accumulate-grad hook the moment each
  gradient is ready, and the full gradient is dropped at once. 2Ψ.
* Stage 3: parameters live as chunks. A model with ``blocks`` (the tiny GPT) is
  gathered block by block: before a block's forward, freed after it, gathered again
  when the gradient reaches the block's output, freed once its gradients are reduced.
  The other parameters (embeddings, the tied head, the final norm) are one unit that
  is gathered for the whole forward and again for the backward. Each unit moves in
  one all-gather and one reduce-scatter, the next unit's gather started while this
  one computes, and its reduce-scatter left running while the next unit computes its
  backward (:mod:`snippets.parallel.sharded.zero_units`). 3Ψ.

Tied weights are one parameter (``module.parameters()`` yields them once); frozen ones
stay replicated and untouched; one that no rank's forward uses gets no gradient and no
step, as in one process (every rank must use the same parameters, as torch's DDP asks).

    python -m snippets run zero            # 3 ranks, stages 1-3, vs one process
    python -m snippets run zero -n 2 --stage 3
"""

from __future__ import annotations

import argparse
import functools
from typing import Callable

import torch
import torch.distributed as dist
import torch.nn as nn

from snippets.core.claims import law
from snippets.core.cli import main_entry, positive_int
from snippets.core.compare import max_difference
from snippets.core.runtime import Spec, UsageError, print0
from snippets.models.tiny_gpt import GPT, GPTConfig, random_batch
from snippets.parallel.sharded import zero_units
from snippets.parallel.sharded.zero_shards import CommCounter, Piece, storage_bytes
from snippets.parallel.sharded.zero_units import Unit
from snippets.sizing import zero_memory

SPEC = Spec(
    summary="ZeRO stages 1-3 by hand: bytes, traffic, vs one process", world_size=3
)


# --8<-- [start:optimizer]
class ZeroOptimizer:
    """Steps this rank's chunks with ``inner`` (any torch optimizer)."""

    def __init__(self, pieces: list[Piece], inner, stage: int, comm: CommCounter):
        self.pieces, self.inner, self.stage, self.comm = pieces, inner, stage, comm
        self.units: list[Unit] = []  # stage 3: filled in by shard()

    @property
    def param_groups(self) -> list[dict]:
        return self.inner.param_groups

    @torch.no_grad()
    def step(self) -> None:
        if self.stage == 1:  # the full gradients are here: reduce-scatter them now
            for piece in self.pieces:
                if piece.param.grad is not None:
                    piece.reduce_grad(into_param_grad=True)
        self.inner.step()  # on 1/N of the values: 1/N of the optimizer state
        for piece in self.pieces if self.stage < 3 else []:
            piece.gather()
        for unit in self.units:  # stage 3 gathers at the next forward
            unit.free()

    def zero_grad(self, set_to_none: bool = True) -> None:
        for piece in self.pieces:
            piece.param.grad = piece.chunk.grad = None


def _reduce_and_drop(piece: Piece, param: torch.Tensor) -> None:
    """Stage 2, as soon as ∇param is accumulated: keep only this rank's chunk."""
    piece.reduce_grad(into_param_grad=False)
    param.grad = None


def zero1_step(
    params: list[nn.Parameter],
    state: dict,
    lr: float,
    momentum: float,
    group: dist.ProcessGroup | None = None,
) -> None:
    """One SGD-with-momentum step of ``params`` under ZeRO stage 1, as a function:
    the first call cuts the parameters into pieces and keeps them, and an SGD over
    this rank's chunks only, in ``state``; every call is a stage-1 ``step()``."""
    if "optimizer" not in state:
        comm = CommCounter(group)
        pieces = [Piece(t, comm, own_storage=False) for t in params]
        chunks = [piece.chunk for piece in pieces]
        inner = torch.optim.SGD(chunks, lr=lr, momentum=momentum)
        state["optimizer"] = ZeroOptimizer(pieces, inner, stage=1, comm=comm)
    state["optimizer"].step()


# --8<-- [end:optimizer]


# --8<-- [start:shard]
def shard(
    module: nn.Module,
    optimizer_class: type,
    stage: int,
    group: dist.ProcessGroup | None = None,
    **optimizer_kwargs,
) -> tuple[nn.Module, ZeroOptimizer]:
    """ZeRO stage 1, 2 or 3 over ``group``; every rank passes the same weights."""
    if stage not in (1, 2, 3):
        raise UsageError(f"the ZeRO stage must be 1, 2 or 3, got {stage!r}")
    comm = CommCounter(group)
    trainable = [p for p in module.parameters() if p.requires_grad]  # ties once
    pieces = {id(p): Piece(p, comm, own_storage=stage == 3) for p in trainable}
    chunks = [piece.chunk for piece in pieces.values()]
    inner = optimizer_class(chunks, **optimizer_kwargs)
    optimizer = ZeroOptimizer(list(pieces.values()), inner, stage, comm)
    if stage == 2:
        for piece in pieces.values():
            hook = functools.partial(_reduce_and_drop, piece)
            piece.param.register_post_accumulate_grad_hook(hook)
    if stage == 3:  # the same, a unit (a block, or the rest) at a time
        optimizer.units = zero_units.hook_units(module, pieces, comm)
    module._zero = optimizer  # for full_state_dict
    return module, optimizer


# --8<-- [end:shard]


# --8<-- [start:report]
def full_state_dict(module: nn.Module) -> dict[str, torch.Tensor]:
    """The full parameters (and buffers), gathered on every rank; a copy."""
    optimizer = getattr(module, "_zero", None)
    freed = [unit for unit in optimizer.units if not unit.is_full] if optimizer else []
    with torch.no_grad():
        for unit in freed:
            unit.gather()
        state = {k: v.detach().clone() for k, v in module.state_dict().items()}
        for unit in freed:
            unit.free()
    return state


def memory_report(module: nn.Module, optimizer) -> dict[str, int]:
    """Bytes of the storages this rank holds, by kind. Works for a plain torch
    optimizer too (stage 0). ``optimizer_scalars``: the part of ``optimizer`` that is
    0-d tensors (Adam's step counters), which the paper's formulas leave out."""
    inner = getattr(optimizer, "inner", optimizer)
    chunks = [piece.chunk for piece in getattr(optimizer, "pieces", [])]
    params = list(module.parameters()) + chunks
    state = [t for s in inner.state.values() for t in s.values()]
    return {
        "parameters": storage_bytes(params),
        "gradients": storage_bytes(p.grad for p in params),
        "optimizer": storage_bytes(state),
        "optimizer_scalars": storage_bytes(
            t for t in state if isinstance(t, torch.Tensor) and t.dim() == 0
        ),
    }


# --8<-- [end:report]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--stage", type=positive_int, choices=(1, 2, 3), help="one stage (default: all)"
    )
    parser.add_argument("--steps", type=positive_int, default=2, help="Adam steps")


# --- Training loops the checks compare: sharded on every rank, and the single process
# that sees the whole (concatenated) batch. Rank r trains on rows [r·b, (r+1)·b) of each
# global batch of N·b sequences; the mean of the ranks' mean losses is the global mean
# loss, so the mean of their gradients is the single process's gradient and the trained
# weights must agree. With k micro-steps a rank splits its rows into k micro-batches and
# backpropagates each mean loss ÷ k: the accumulated gradient is its rows' mean
# gradient, as one big step's is.


def train_single(cfg, optimizer_class, kwargs, data, dtype, make=GPT) -> dict:
    """One process, the whole batch, one backward a step: the oracle. Returns its state
    dict. ``make(cfg)`` builds the model (the tiny GPT unless a test varies it)."""
    model = make(cfg).to(dtype)
    optimizer = optimizer_class(model.parameters(), **kwargs)
    for idx, targets in data:
        optimizer.zero_grad()
        model(idx, targets)[1].backward()
        optimizer.step()
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def train_sharded(
    cfg,
    stage: int,
    optimizer_class,
    kwargs: dict,
    data: list,
    dtype: torch.dtype,
    group: dist.ProcessGroup | None = None,
    make: Callable[[GPTConfig], nn.Module] = GPT,
    micro_steps: int = 1,
):
    """ZeRO on this rank's rows, in ``micro_steps`` micro-batches a step. Returns
    (module, optimizer, values communicated per step) with the last step's gradients
    and state still held, for memory_report."""
    rank, N = dist.get_rank(group), dist.get_world_size(group)
    module, optimizer = shard(
        make(cfg).to(dtype), optimizer_class, stage, group, **kwargs
    )
    per_step = []
    for idx, targets in data:
        b = idx.shape[0] // N  # this rank's rows
        m = b // micro_steps  # rows per micro-batch
        law(m * micro_steps == b, f"{b} rows do not split into {micro_steps}")
        optimizer.zero_grad()
        optimizer.comm.reset()
        for k in range(micro_steps):
            rows = slice(rank * b + k * m, rank * b + (k + 1) * m)
            loss = module(idx[rows], targets[rows])[1]
            (loss / micro_steps).backward()  # Σ over k of mean ÷ k: the mean
        optimizer.step()
        per_step.append(dict(optimizer.comm.elements))
    return module, optimizer, per_step


def main(stage: int | None = None, steps: int = 2) -> dict:
    cfg, N = GPTConfig(), dist.get_world_size()
    data = random_batch(cfg, 2 * N, steps=steps)
    adam, kw, dt = torch.optim.Adam, {"lr": 1e-2}, torch.float64  # 8 B a value
    reference = train_single(cfg, adam, kw, data, dt)
    psi, rows = cfg.num_params(), []
    for s in (1, 2, 3) if stage is None else (stage,):
        module, opt, comm = train_sharded(cfg, s, adam, kw, data, dt)
        calls = dict(opt.comm.calls)  # the last step's
        n = len(opt.units) if s == 3 else len(opt.pieces)  # a unit, or a parameter
        gathers = 2 * n if s == 3 else n  # stage 3 gathers again for the backward
        law(calls == {"all_gather": gathers, "reduce_scatter": n}, (s, calls))
        mine = sum(pc.b - pc.a for pc in opt.pieces)
        measured = memory_report(module, opt)
        held = measured["parameters"] + measured["gradients"] + measured["optimizer"]
        held -= measured["optimizer_scalars"]
        exact = zero_memory.sharded_bytes(s, psi, mine, 8, 8, 16)["total"]
        law(held == exact, f"stage {s}: holds {held} B, its shards say {exact}")
        state = full_state_dict(module)
        delta = torch.tensor(max_difference(state, reference))
        dist.all_reduce(delta, op=dist.ReduceOp.MAX)
        law(delta.item() < 1e-12, f"stage {s}: {delta.item():.1e} from one process")
        sent = sum(comm[-1].values())
        padded = sum(pc.N * pc.s for pc in opt.pieces)
        law(sent == zero_memory.comm_values(s, padded), (sent, padded))
        rows.append(
            {
                "stage": s,
                "N": N,
                "psi": psi,
                "bytes_measured": held,
                "bytes_formula": round(
                    zero_memory.model_state_bytes(s, psi, N, 8, 8, 16)["total"]
                ),
                "comm_measured": sent,
                "comm_formula": zero_memory.comm_values(s, psi),
                "max_abs_diff": delta.item(),
                "all_gathers": calls["all_gather"],
                "reduce_scatters": calls["reduce_scatter"],
            }
        )
    print0(f"tiny GPT, Ψ = {psi:,} parameters, fp64 Adam, {N} ranks, {steps} steps")
    print0(
        "stage  bytes/rank  formula     comm values  formula   "
        + "max |Δ| vs 1 process  AG + RS calls"
    )
    for r in rows:
        print0(
            f"{r['stage']:>5}  {r['bytes_measured']:>10,}  {r['bytes_formula']:>10,.0f}"
            f"  {r['comm_measured']:>11,}  {r['comm_formula']:>7,}"
            f"   {r['max_abs_diff']:.1e}{r['all_gathers']:>16} + {r['reduce_scatters']}"
        )
    mixed = zero_memory.formula_table(psi, "mixed Adam")
    fp32 = zero_memory.formula_table(psi, "fp32 Adam")
    return {
        "tables": {"stages": rows, "formula_mixed": mixed, "formula_fp32": fp32},
        "provenance": {"backend": dist.get_backend(), "world_size": N},
    }


if __name__ == "__main__":
    raise SystemExit(main_entry(main, SPEC))
