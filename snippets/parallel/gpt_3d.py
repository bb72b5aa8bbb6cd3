"""The tiny GPT trained on a dp × pp × cp × tp mesh of ranks, checked against one
process that trains the same seed on the same global batches.

Every rank builds its part (``gpt_3d_model``): tensor and sequence parallel within
``tp_group`` (``--no-sequence-parallel``: tensor parallel only), ring attention
within ``cp_group``, its pipeline stages' blocks; its rows of the batch and its
shard of each sequence. A step is

1. the pipeline schedule over ``pp_group``, run by ``pipeline_executor.execute``: m
   micro-batches, each loss Σ CE ÷ (the replica's tokens), so the m parts add up to
   the replica's mean (vocab parallel when tp > 1); the executor sums the tied
   embedding's two gradients;
2. the LayerNorms' sequence-parallel gradients summed over ``tp_group``, then every
   gradient averaged over ``dp_cp_group``: one all-reduce (SUM, then ÷) per
   parameter after the schedule, not torch-style DDP hooks. The executor calls
   backward once per micro-batch and the hooks would reduce after each; and a
   pipeline stage holds only some parameters, which DDP takes for unused ones;
3. an optimizer step (Adam, or SGD).

The oracle is the dense GPT in one process on the whole batch, run on every rank
beside the parallel one. Each step compares the loss (relative), every gradient this
rank holds with the dense gradient's block (max |Δ| over the largest |gradient|), and
at the end every parameter the same way. Tolerance: 1e-10 in fp64, 1e-5 in fp32. A
run that misses it prints its numbers and exits 1.

``--experts E`` makes every block's MLP a mixture of E experts, each token sent to
its ``--top-k K`` most probable (``tiny_gpt``), with no capacity limit: nothing is
dropped, since drops depend on which tokens share a forward pass. The loss both
runs train on is the cross-entropy plus α times the sequence-wise balance loss of
each block. ``--ep P`` splits the experts over P ranks, folded over data parallel
(P divides dp; ``Mesh``): each group of P data-parallel replicas trades its tokens by
all-to-all. Tensor parallel leaves the experts whole on every tp rank.

    python -m snippets run gpt_3d                      # 4 ranks: dp 1 × pp 2 × tp 2
    python -m snippets run gpt_3d -n 8 --dp 2 --tp 2 --pp 2 --schedule interleaved
    python -m snippets run gpt_3d -n 4 --dp 2 --pp 2 --tp 1 --experts 4 --top-k 2 --ep 2
    torchrun --nproc-per-node 8 -m snippets run gpt_3d --dp 2 --tp 2 --pp 2 --json
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json

import torch
import torch.distributed as dist

from snippets.core.claims import LawBroken
from snippets.core.cli import main_entry, nonnegative_int, positive_int
from snippets.core.compare import max_difference
from snippets.core.runtime import Spec, UsageError, device, print0
from snippets.models.tiny_gpt import GPT, GPTConfig, random_batch
from snippets.parallel.gpt_3d_model import average_gradients, rank_batch, rank_model
from snippets.parallel.mesh import Mesh, check_ep
from snippets.parallel.pipeline.pipeline_executor import execute
from snippets.parallel.pipeline.pipeline_schedules import NAMES, check_arguments
from snippets.parallel.tensor.tp_gpt import own_part

SPEC = Spec(summary="the tiny GPT on a dp×pp×cp×tp mesh = one process", world_size=4)
# V=64, N=16, L=4, H=4, d=128: t ≤ 4, p·v ≤ 4, cp ≤ 8; heads of 32 for ring attention.
# No biases: a key bias gets no gradient (softmax ignores it), and Adam's g/(|g|+ε)
# would turn two runs' rounding noise there into 1e-10 apart. lr 3e-3 keeps the
# trajectory smooth: at 1e-2 the loss jumps and the rounding differences grow.
CFG = GPTConfig(n_layer=4, n_head=4, n_embd=128, bias=False)
DTYPES = {"float64": torch.float64, "float32": torch.float32}
TOLERANCE = {torch.float64: 1e-10, torch.float32: 1e-5}
OPTIMIZERS = {
    "adam": (torch.optim.Adam, {"lr": 3e-3}),
    "sgd": (torch.optim.SGD, {"lr": 0.5}),
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    for axis, default in (("dp", "the rest"), ("pp", 2), ("cp", 1), ("tp", 2)):
        parser.add_argument(
            f"--{axis}", type=positive_int, default=None if axis == "dp" else default,
            help=f"{axis} size (default {default})",
        )  # fmt: skip
    parser.add_argument("--schedule", choices=NAMES, default="1f1b")
    parser.add_argument(
        "--chunks", type=positive_int, default=None, help="v (2 for interleaved)"
    )
    parser.add_argument("--microbatches", type=positive_int, default=2, help="m")
    parser.add_argument("--batch", type=positive_int, default=8, help="global rows")
    parser.add_argument("--steps", type=positive_int, default=3)
    parser.add_argument("--optimizer", choices=tuple(OPTIMIZERS), default="adam")
    parser.add_argument("--dtype", choices=tuple(DTYPES), default="float64")
    parser.add_argument(
        "--no-sequence-parallel", dest="sequence_parallel", action="store_false",
        help="tensor parallel only: blocks on the whole sequence",
    )  # fmt: skip
    parser.add_argument(
        "--experts", type=nonnegative_int, default=0, metavar="E",
        help="experts in each block's MLP (default 0: dense)",
    )  # fmt: skip
    parser.add_argument(
        "--top-k", type=positive_int, default=1, metavar="K",
        help="experts per token, 1 to E (default 1)",
    )  # fmt: skip
    parser.add_argument(
        "--ep", type=positive_int, default=1,
        help="expert parallel size, folded over dp: divides dp and E (default 1)",
    )  # fmt: skip
    parser.add_argument("--json", dest="as_json", action="store_true")


# --8<-- [start:check]
def check_shape(world, dp, pp, cp, tp, cfg, batch, m, v, schedule, sp=True,
                ep=1, experts=0, top_k=1) -> int:  # fmt: skip
    """One UsageError line for each way a request can be wrong; returns dp."""
    if dp is None:  # the ranks left over
        if world % (pp * cp * tp):
            raise UsageError(
                f"{world} ranks are not a multiple of pp·cp·tp = {pp * cp * tp}; "
                "choose sizes whose product is the world size"
            )
        dp = world // (pp * cp * tp)
    if dp * pp * cp * tp != world:
        raise UsageError(
            f"dp·pp·cp·tp = {dp}·{pp}·{cp}·{tp} = {dp * pp * cp * tp} but the world "
            f"has {world} ranks; make the product equal it"
        )
    for what, n in (("n_head", cfg.n_head), ("vocab_size", cfg.vocab_size)):
        if n % tp:
            raise UsageError(f"{what}={n} is not divisible by --tp {tp}")
    if cfg.n_layer % (pp * v):
        raise UsageError(
            f"{cfg.n_layer} layers do not split into pp·v = {pp}·{v} equal stages"
        )
    if batch % (dp * m):
        raise UsageError(
            f"--batch {batch} is not divisible by dp·m = {dp}·{m}: every replica "
            "needs m equal micro-batches"
        )
    if cfg.block_size % (2 * cp):
        raise UsageError(
            f"sequences of {cfg.block_size} tokens do not cut into 2·cp = {2 * cp} "
            "zig-zag chunks; choose a cp that divides half of it"
        )
    if sp and (cfg.block_size // cp) % tp:
        raise UsageError(
            f"sequence parallel cuts a rank's {cfg.block_size // cp} tokens in "
            f"--tp {tp}: choose a tp that divides it, or --no-sequence-parallel"
        )
    check_arguments(schedule, pp, m, v)
    if not experts and (ep > 1 or top_k != 1):
        raise UsageError("--ep and --top-k need --experts: they split and pick experts")
    if experts and not 1 <= top_k <= experts:
        raise UsageError(f"--top-k must be 1 to {experts} (the experts), got {top_k}")
    if experts % ep:
        raise UsageError(
            f"{experts} experts do not split over --ep {ep}; use a divisor"
        )
    check_ep(dp, ep)
    return dp


# --8<-- [end:check]


def mean_loss(run_loss: torch.Tensor | None, mesh: Mesh, dtype) -> float:
    """The last stage's ranks hold their replica's mean loss (the tp ranks the same
    one); their mean is the global batch's."""
    mine = torch.zeros((), dtype=dtype, device=device())
    mine = mine if run_loss is None else run_loss.detach()
    dist.all_reduce(mine)  # SUM over the world; only last-stage ranks add
    return mine.item() / (mesh.dp * mesh.cp * mesh.tp)


def worst(model, dense, mesh: Mesh, grads: bool) -> float:
    """max |Δ| over every tensor on every rank, over the largest dense |value|."""
    mine = functools.partial(own_part, group=mesh.tp_group)  # this rank's block
    d = max_difference(model, dense, grads=grads, part=mine)
    d = torch.tensor(d, dtype=torch.float64, device=device())
    dist.all_reduce(d, op=dist.ReduceOp.MAX)  # every rank sees the verdict
    values = [q.grad if grads else q for q in dense.parameters()]
    return d.item() / max(x.abs().max().item() for x in values if x is not None)


def balance_value(model, mesh: Mesh, sp: bool, dtype) -> float:
    """α · the balance losses, from every rank's share: summed over the pipeline
    stages and, under sequence parallel, over tp; averaged over dp·cp (and over tp,
    where its ranks hold the same)."""
    mine = torch.as_tensor(model.balance.total, dtype=dtype, device=device()).clone()
    dist.all_reduce(mine)
    return mine.item() / (mesh.dp * mesh.cp * (1 if sp and mesh.tp > 1 else mesh.tp))


# --8<-- [start:train]
def train(mesh: Mesh, schedule: str, m: int, v: int, data: list, dtype, opt: str,
          sp: bool = True, cfg: GPTConfig = CFG):  # fmt: skip
    """The 3D run and the single process, step by step; rows of numbers per step."""
    dev = device()  # the CPU on gloo, this rank's GPU on NCCL
    rows = data[0][0].shape[0] // mesh.dp  # a replica's
    model = rank_model(cfg, mesh, v, dtype, device=dev, sequence_parallel=sp,
                       rows=rows)  # fmt: skip
    dense = GPT(cfg).to(dev, dtype)
    make, kwargs = OPTIMIZERS[opt]
    opts = [make(x.parameters(), **kwargs) for x in (model, dense)]
    rows = []
    for step, pair in enumerate(data):
        idx, targets = (t.to(dev) for t in pair)  # (dp·b, N) each
        for o in opts:
            o.zero_grad()
        mine = rank_batch(idx, targets, mesh, sp)  # (b, N/cp); SP ids (b, N/(cp·t))
        if cfg.num_experts:
            model.balance.total = 0.0
        run = execute(model, schedule, *mine, m, v, group=mesh.pp_group)
        average_gradients(model, mesh, sp)
        loss = mean_loss(run.loss, mesh, dtype)
        if cfg.num_experts:  # the balance losses, from the stages that hold them
            loss += balance_value(model, mesh, sp, dtype)
        reference = dense(idx, targets)[1]  # one process, the whole batch, + α·aux
        reference.backward()
        rows.append({
            "step": step, "loss": loss, "reference_loss": reference.item(),
            "d_loss": abs(loss - reference.item()) / abs(reference.item()),
            "d_grads": worst(model, dense, mesh, grads=True),
        })  # fmt: skip
        for o in opts:
            o.step()
    return rows, worst(model, dense, mesh, grads=False)


# --8<-- [end:train]


def failures(rows: list[dict], d_params: float, tolerance: float) -> list[str]:
    """What missed the tolerance, one phrase each; empty when all is within it."""
    bad = [
        f"step {r['step']} {k} {r[k]:.1e}"
        for r in rows
        for k in ("d_loss", "d_grads")
        if not r[k] <= tolerance  # NaN fails too
    ]
    return bad + ([f"parameters {d_params:.1e}"] if not d_params <= tolerance else [])


def show(rows, d_params, tol, mesh: Mesh, what: str, sp: bool) -> None:
    print0(what)
    print0(
        f"mesh dp={mesh.dp} pp={mesh.pp} cp={mesh.cp} tp={mesh.tp}"
        f"{f' (ep={mesh.ep} folded over dp)' if mesh.ep > 1 else ''}"
        f"{', sequence parallel' if sp else ''}, {mesh.world_size} ranks"
    )
    print0("Δ: |Δ loss|/loss, max|Δ|/max|value|")
    print0(f"{'step':>4}  {'loss, 3D':>18}  {'loss, one process':>18}"
           f"  {'Δ loss':>8}  {'Δ grads':>8}")  # fmt: skip
    for r in rows:
        print0(f"{r['step']:>4}  {r['loss']:>18.12f}  {r['reference_loss']:>18.12f}"
               f"  {r['d_loss']:>8.1e}  {r['d_grads']:>8.1e}")  # fmt: skip
    ok = "✓" if not failures(rows, d_params, tol) else "✗"
    print0(
        f"parameters after {len(rows)} steps: Δ {d_params:.1e}; tolerance {tol:g} {ok}"
    )


def main(
    dp: int | None = None, pp: int = 2, cp: int = 1, tp: int = 2,
    schedule: str = "1f1b", chunks: int | None = None, microbatches: int = 2,
    batch: int = 8, steps: int = 3, optimizer: str = "adam",
    dtype: str = "float64", sequence_parallel: bool = True, as_json: bool = False,
    experts: int = 0, top_k: int = 1, ep: int = 1,
) -> dict:  # fmt: skip
    v = chunks or (2 if schedule == "interleaved" else 1)
    m, world = microbatches, dist.get_world_size()
    sp = sequence_parallel
    dp = check_shape(world, dp, pp, cp, tp, CFG, batch, m, v, schedule, sp,
                     ep, experts, top_k)  # fmt: skip
    cfg = dataclasses.replace(CFG, num_experts=experts, top_k=top_k)
    mesh, torch_dtype = Mesh(dp, pp, cp, tp, ep), DTYPES[dtype]
    data = [random_batch(cfg, batch)] * steps  # one batch, learnt: the loss must fall
    rows, d_params = train(mesh, schedule, m, v, data, torch_dtype, optimizer, sp, cfg)
    tol = TOLERANCE[torch_dtype]
    sizes = {"dp": dp, "pp": pp, "cp": cp, "tp": tp, "world_size": world}
    plan = {"schedule": schedule, "microbatches": m, "chunks": v,
            "sequence_parallel": sp and tp > 1}  # fmt: skip
    if experts:  # dense runs keep their record as it was
        sizes["ep"] = ep
        plan.update(experts=experts, top_k=top_k, aux_loss_coef=cfg.aux_loss_coef)
    record = {
        "losses": [r["loss"] for r in rows],
        "reference_losses": [r["reference_loss"] for r in rows],
        "mesh": sizes, **plan, "dtype": dtype, "optimizer": optimizer,
        "tolerance": tol, "max_param_difference": d_params,
    }  # fmt: skip
    if as_json:
        print0(json.dumps({**record, "steps": rows}, indent=1))
    else:
        c = cfg
        moe = f", {experts} experts top-{top_k}" if experts else ""
        show(rows, d_params, tol, mesh, f"tiny GPT L={c.n_layer} H={c.n_head} "
             f"d={c.n_embd} V={c.vocab_size}{moe}, batch {batch}×{c.block_size}, "
             f"{dtype} {optimizer}, {schedule} m={m} v={v}",
             plan["sequence_parallel"])  # fmt: skip
    bad = failures(rows, d_params, tol)
    if bad:  # every rank has the same numbers: all fail together
        raise LawBroken(f"3D run ≠ one process beyond {tol:g}: {', '.join(bad)}")
    provenance = {"backend": dist.get_backend(), "world_size": world}
    return {**record, "tables": {"steps": rows}, "provenance": provenance}


if __name__ == "__main__":
    raise SystemExit(main_entry(main, SPEC))
