"""Mixed precision by hand: a bf16 working copy of the model, fp32 master weights in
the optimizer (Micikevicius et al. 2018, arXiv:1710.03740; the ZeRO paper's K = 12).

Forward and backward run on bf16 parameters, so the gradients come out bf16. A step:

1. cast up: each master's gradient is the bf16 gradient in fp32;
2. step the fp32 masters with any torch optimizer (Adam keeps two fp32 moments);
3. cast down: each bf16 parameter becomes its master rounded to nearest.

Bytes per parameter with Adam: 2 (bf16 weight) + 2 (bf16 gradient) + 4 (master) + 4 + 4
(moments) = 16, the paper's 16Ψ. The fp32 gradient lives only inside ``step()``.

Why a master: bf16 keeps 8 significant bits, so an update smaller than half the
spacing between neighbouring values rounds away. Just below 1.0 the spacing is
2⁻⁸ ≈ 0.0039, so steps of 0.001 never move a bf16 weight of 1.0; a master adds
them up.

:class:`MasterWeights` is an optimizer like any other, so ZeRO takes it unchanged:
``zero.shard(gpt.to(torch.bfloat16), with_master_weights(Adam), stage, lr=…)`` keeps
masters of this rank's chunks only: 4Ψ + 12Ψ/N, 2Ψ + 14Ψ/N and 16Ψ/N per rank.

    python -m snippets run mixed_precision        # 2 ranks, stages 0-3, vs fp32
"""

from __future__ import annotations

import argparse
import functools

import torch
import torch.distributed as dist
import torch.nn as nn

from snippets.core.claims import law
from snippets.core.cli import main_entry, positive_int
from snippets.core.parts import Excerpt
from snippets.core.runtime import Spec, print0
from snippets.models.tiny_gpt import GPT, GPTConfig, random_batch
from snippets.parallel.sharded import zero
from snippets.sizing import zero_memory

SPEC = Spec(
    summary="bf16 weights, fp32 masters: 16 bytes a parameter, ZeRO 1-3", world_size=2
)
LOW = torch.bfloat16
# |w - w_fp32| / |w_fp32 - w_0| (norms), plain SGD: how much of fp32's update a run
# got wrong
UPDATE_TOLERANCE = 2e-2


# --8<-- [start:master]
class MasterWeights:
    """Steps low-precision parameters through fp32 copies with ``optimizer_class``."""

    def __init__(self, params, optimizer_class: type = torch.optim.Adam, **kwargs):
        self.params = [p for p in params if p.requires_grad]
        self.masters = [  # fp32 copies, 4 B a value; a copy even of an fp32 param
            nn.Parameter(p.detach().to(torch.float32, copy=True)) for p in self.params
        ]
        self.optimizer = optimizer_class(self.masters, **kwargs)

    @property
    def param_groups(self) -> list[dict]:
        return self.optimizer.param_groups

    @property
    def state(self) -> dict:
        """Per master: itself and the inner optimizer's state (Adam: 4 + 8 bytes a
        value, the paper's K = 12), for memory_report."""
        inner = self.optimizer.state
        return {m: {"master": m, **inner.get(m, {})} for m in self.masters}

    @torch.no_grad()
    def step(self) -> None:
        for p, m in zip(self.params, self.masters):  # 1. cast up
            m.grad = None if p.grad is None else p.grad.float()
        self.optimizer.step()  # 2. in fp32
        for p, m in zip(self.params, self.masters):
            p.copy_(m)  # 3. cast down, round to nearest even
            m.grad = None  # the fp32 gradient was only for this step

    def zero_grad(self, set_to_none: bool = True) -> None:
        for p in self.params:
            p.grad = None


def with_master_weights(optimizer_class: type) -> functools.partial:
    """``optimizer_class`` behind fp32 masters, to pass as an optimizer class."""
    return functools.partial(MasterWeights, optimizer_class=optimizer_class)


# --8<-- [end:master]


# --8<-- [start:rounding]
def small_updates(steps: int = 10, lr: float = 1e-3) -> tuple[float, float]:
    """A bf16 weight of 1.0, gradient 1, ``steps`` SGD steps: (bf16 alone, master)."""
    alone, mixed = (nn.Parameter(torch.ones(1, dtype=LOW)) for _ in range(2))
    plain = torch.optim.SGD([alone], lr=lr)
    master = MasterWeights([mixed], torch.optim.SGD, lr=lr)
    for _ in range(steps):
        alone.grad, mixed.grad = torch.ones(1, dtype=LOW), torch.ones(1, dtype=LOW)
        plain.step()  # 1 - 0.001 rounds back to 1.0: the update is lost
        master.step()  # the fp32 master keeps it
    return alone.item(), mixed.item()


# --8<-- [end:rounding]


def bf16_gpt(cfg: GPTConfig) -> nn.Module:
    """The tiny GPT in bf16; an fp32 run starts from it too, so both share w₀."""
    return GPT(cfg).to(LOW)


def flat(tensors) -> torch.Tensor:
    return torch.cat([t.detach().float().reshape(-1) for t in tensors])


# --8<-- [start:runs]
def mixed_run(cfg: GPTConfig, stage: int, optimizer_class, kwargs: dict, data: list):
    """(module, optimizer) trained in bf16 with fp32 masters: stage 0 is one process
    on the whole batch, stages 1-3 ZeRO on this rank's rows."""
    masters = with_master_weights(optimizer_class)
    if stage > 0:
        return zero.train_sharded(
            cfg, stage, masters, kwargs, data, LOW, make=bf16_gpt
        )[:2]
    model = bf16_gpt(cfg)
    optimizer = masters(model.parameters(), **kwargs)
    for idx, targets in data:
        optimizer.zero_grad()
        model(idx, targets)[1].backward()
        optimizer.step()
    return model, optimizer


def full_masters(optimizer) -> torch.Tensor:
    """Every fp32 master, flat in parameter order; a ZeRO run's are all-gathered."""
    inner = getattr(optimizer, "inner", optimizer)
    if not hasattr(optimizer, "pieces"):
        return flat(inner.masters)
    out = []
    for piece, master in zip(optimizer.pieces, inner.masters):
        full = master.new_empty(piece.N * piece.s)  # (N·s,)
        mine = piece.padded(master.detach(), piece.s, 0)  # (s,)
        dist.all_gather_single(full, mine, group=piece.comm.group)
        out.append(full[: piece.n])
    return torch.cat(out)


def held_bytes(module: nn.Module, optimizer) -> int:
    """Model states from the storages, less Adam's 0-d step counters."""
    m = zero.memory_report(module, optimizer)
    return m["parameters"] + m["gradients"] + m["optimizer"] - m["optimizer_scalars"]


# --8<-- [end:runs]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--steps", type=positive_int, default=3, help="SGD steps")


def main(steps: int = 3) -> dict:
    cfg, N = GPTConfig(), dist.get_world_size()
    psi, data = cfg.num_params(), random_batch(cfg, 2 * N, steps=steps)
    sgd, kw = torch.optim.SGD, {"lr": 0.1}
    start = flat(bf16_gpt(cfg).parameters())
    names = [name for name, _ in GPT(cfg).named_parameters()]  # the tied head once
    fp32 = zero.train_single(cfg, sgd, kw, data, torch.float32, bf16_gpt)
    ref = flat(fp32[n] for n in names)

    def update_error(w: torch.Tensor) -> float:
        return ((w - ref).norm() / (ref - start).norm()).item()

    alone = zero.train_single(cfg, sgd, kw, data, LOW, bf16_gpt)
    alone_error = update_error(flat(alone[n] for n in names))
    law(alone_error > UPDATE_TOLERANCE, f"bf16 alone: {alone_error:.1e} is close")
    rows = []
    for stage in range(4):
        error = update_error(full_masters(mixed_run(cfg, stage, sgd, kw, data)[1]))
        law(error < UPDATE_TOLERANCE, f"stage {stage}: update off by {error:.1e}")
        module, opt = mixed_run(cfg, stage, torch.optim.Adam, {"lr": 1e-3}, data[:1])
        held = held_bytes(module, opt)
        mine = sum(pc.b - pc.a for pc in opt.pieces) if stage else psi
        exact = zero_memory.sharded_bytes(stage, psi, mine, 2, 2, 12)["total"]
        law(held == exact, f"stage {stage}: holds {held} B, its shards say {exact}")
        paper = zero_memory.model_state_bytes(stage, psi, N, 2, 2, 12)["total"]
        rows.append(
            {
                "stage": stage,
                "N": N,
                "paper": zero_memory.PAPER[stage],
                "bytes_measured": held,
                "bytes_formula": round(paper),
                "update_error": error,
            }
        )
    alone_value, master_value = small_updates()
    law(
        alone_value == 1.0 and master_value == torch.tensor(0.99).to(LOW).item(),
        "bf16 alone keeps 1.0; the fp32 master reaches 0.99",
    )
    said = Excerpt()  # what the note shows: the run, and bf16 without masters
    said(f"tiny GPT, Ψ = {psi:,}: bf16 weights, grads; fp32 masters; {N} ranks")
    print0("stage  paper         bytes/rank     formula   update error vs fp32")
    for r in rows:
        print0(
            f"{r['stage']:>5}  {r['paper']:<12}  {r['bytes_measured']:>10,}"
            f"  {r['bytes_formula']:>10,.0f}   {r['update_error']:.1e}"
        )
    said(
        f"bf16 alone, no masters: update error {alone_error:.1e} "
        f"(bound {UPDATE_TOLERANCE:.0e}); {steps} SGD steps, lr 0.1"
    )
    said(
        f"1.0 after 10 steps of -0.001: bf16 alone {alone_value}, "
        f"with a master {master_value}"
    )
    memory = zero_memory.formula_table(psi, "mixed Adam")
    for row in memory:
        if row["N"] == N:
            row |= {f"measured {r['stage']}": r["bytes_measured"] for r in rows}
    return {
        "tables": {"stages": rows, "memory": memory},
        "excerpts": {"summary": said.lines},
        "bf16_alone_update_error": alone_error,
        "small_updates": {"bf16_alone": alone_value, "master": master_value},
        "provenance": {"backend": dist.get_backend(), "world_size": N},
    }


if __name__ == "__main__":
    raise SystemExit(main_entry(main, SPEC))
