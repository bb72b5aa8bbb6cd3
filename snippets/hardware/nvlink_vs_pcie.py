"""NVLink vs PCIe: the same DDP training step, once with NCCL peer-to-peer on and once
with ``NCCL_P2P_DISABLE=1``, and the ratio of their step times.

With P2P off NCCL may not copy GPU to GPU directly (over NVLink, or PCIe peer to peer);
it stages every chunk through host memory instead. NCCL reads the variable when its
communicator starts, so each variant gets its own fresh set of ranks: the parent sets
the variable, then spawns, and the ranks inherit it.

The model is the shared GPT (``snippets.models.tiny_gpt``). Before timing, each variant
checks that DDP's averaged gradients equal the gradients of one unsplit model on the
whole batch (the oracle). The variants take turns, one fresh launch each; the ratio is
taken per round. On a CPU both run gloo at a tiny size, so this never rots, but there
they are the same transport and the ratio measures the machine's drift, not a link.

    python -m snippets run nvlink_vs_pcie --rounds 6   # both: all GPUs, or 2 CPU ranks
    NCCL_P2P_DISABLE=1 torchrun --nproc-per-node 8 -m snippets run nvlink_vs_pcie
"""

from __future__ import annotations

import argparse
import copy
import os
import statistics
import textwrap
from dataclasses import asdict
from typing import NamedTuple

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

from snippets.core.claims import Spread, law, ratio_sentence
from snippets.core.cli import main_entry, positive_int
from snippets.core.measure import time_it
from snippets.core.results import admonition
from snippets.core.runtime import (
    Spec,
    describe_device,
    device,
    gpu_count,
    launch,
    print0,
)
from snippets.models.tiny_gpt import GPT, GPTConfig, random_batch

SPEC = Spec(
    timed=True,  # it measures time: run-all runs it alone
    summary="DDP step time with NCCL peer-to-peer on vs NCCL_P2P_DISABLE=1",
    world_size=1,
    timeout_s=120,
)


# --8<-- [start:sizes]
class Workload(NamedTuple):
    model: GPTConfig
    batch: int  # sequences per rank, B; each is model.block_size tokens long


SIZES = {
    "tiny": Workload(GPTConfig(), batch=2),  # 28k parameters: seconds on a CPU
    "small": Workload(  # 49M parameters: 196 MB of fp32 gradients every step
        GPTConfig(vocab_size=8192, block_size=256, n_layer=6, n_head=12, n_embd=768),
        batch=8,
    ),
}
# --8<-- [end:sizes]


# --8<-- [start:ddp]
def ddp_step_seconds(work: Workload, iters: int = 5) -> dict:
    """On every rank: check DDP's gradients against the full-batch oracle, then time
    steps."""
    rank, p, dev, cfg = dist.get_rank(), dist.get_world_size(), device(), work.model
    model = GPT(cfg, seed=0).to(dev)  # the same initial model on every rank
    oracle = copy.deepcopy(model)
    x, y = random_batch(cfg, p * work.batch, device=dev)  # the same (p·B, N) batch
    mine = slice(rank * work.batch, (rank + 1) * work.batch)  # this rank's (B, N)
    ddp = DDP(model, device_ids=[dev] if dev.type == "cuda" else None)

    ddp(x[mine], y[mine])[1].backward()  # DDP all-reduces (averages) the gradients
    oracle(x, y)[1].backward()  # equal shards: the mean of the shard means
    # One scale for all: some gradients are 0 up to rounding (the key bias: softmax
    # ignores a shift shared by every key), so a per-tensor scale would be noise.
    scale = max(q.grad.abs().max().item() for q in oracle.parameters())
    for (name, got), want in zip(model.named_parameters(), oracle.parameters()):
        law(
            torch.allclose(got.grad, want.grad, rtol=1e-3, atol=1e-4 * scale),
            f"DDP gradient of {name} is off",
        )

    opt = torch.optim.SGD(ddp.parameters(), lr=1e-3)

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        ddp(x[mine], y[mine])[1].backward()
        opt.step()

    seconds = time_it(step, warmup=2, iters=iters, device=dev)  # slowest rank's median
    return {
        "step_s": seconds,
        "backend": dist.get_backend(),
        "ranks": p,
        "NCCL_P2P_DISABLE": os.environ.get("NCCL_P2P_DISABLE", "0"),
        "params": sum(t.numel() for t in model.parameters()),
    }


# --8<-- [end:ddp]


# --8<-- [start:variants]
def run_variant(
    p2p_disable: str, work: Workload, ranks: int, backend: str, iters: int
) -> dict:
    """Fresh ranks with NCCL_P2P_DISABLE set in the parent before spawning: they
    inherit it."""
    before = os.environ.get("NCCL_P2P_DISABLE")
    os.environ["NCCL_P2P_DISABLE"] = p2p_disable
    try:
        return launch(
            ddp_step_seconds,
            ranks,
            backend,
            timeout_s=SPEC.timeout_s,
            args=(work, iters),
        )[0]
    finally:
        if before is None:
            os.environ.pop("NCCL_P2P_DISABLE")
        else:
            os.environ["NCCL_P2P_DISABLE"] = before


# --8<-- [end:variants]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--size",
        choices=("auto", *SIZES),
        default="auto",
        help="model size (auto: small on GPUs, tiny on a CPU)",
    )
    parser.add_argument(
        "--iters",
        type=positive_int,
        default=10,
        metavar="N",
        help="timed steps per launch (median kept; default 10)",
    )
    parser.add_argument(
        "--rounds",
        type=positive_int,
        default=8,
        metavar="R",
        help="launches of each variant, taking turns (default 8)",
    )


def _describe(work: Workload) -> str:
    c = work.model
    return (
        f"GPT L={c.n_layer} d={c.n_embd} H={c.n_head} V={c.vocab_size} "
        f"N={c.block_size}, B={work.batch} per rank"
    )


DRIFT = (
    " On {} the variable changes nothing: this is drift between launches, not a link."
)


def where(size: str, ranks: int, backend: str, on: str) -> str:
    """The page's opening box: what this run was, and on what (``on``)."""
    ours = f"Our run on this page is the `{size}` model on {ranks}"
    theirs = "[someone else's](#someone-elses-measurement), on their machine"
    return admonition("info", "What ran, and where", f"{ours} GPUs ({on}) over NCCL, "
        f"the two variants taking turns. The other numbers are {theirs}."
        if backend == "nccl" else f"{ours} {backend} ranks on {on}, with no GPU: it "
        "checks the code, and its two variants are the same program, run in turns. "
        f"The only NVLink numbers on this page are {theirs}.")  # fmt: skip


def main(size: str = "auto", iters: int = 10, rounds: int = 8) -> dict:
    if dist.is_initialized():  # torchrun or -n N: the variable was fixed before us
        on_gpu = dist.get_backend() == "nccl"
        work = SIZES[("small" if on_gpu else "tiny") if size == "auto" else size]
        got = ddp_step_seconds(work, iters)
        print0(
            f"one variant (NCCL_P2P_DISABLE={got['NCCL_P2P_DISABLE']}), {got['ranks']} "
            f"ranks on {got['backend']}: {got['step_s'] * 1e3:.1f} ms/step"
        )
        print0(f"{_describe(work)}; DDP gradients = full-batch gradients ✓")
        print0("(run it with and without NCCL_P2P_DISABLE=1 to compare)")
        return {"tables": {"steps": [got]}}
    gpus = gpu_count()
    ranks, backend = (gpus, "nccl") if gpus >= 2 else (2, "gloo")
    name = ("small" if backend == "nccl" else "tiny") if size == "auto" else size
    work = SIZES[name]
    seconds: dict[str, list[float]] = {"0": [], "1": []}
    for r in range(rounds):  # on off, off on, on off …: neither always goes first
        for flag in ("0", "1") if r % 2 == 0 else ("1", "0"):
            got = run_variant(flag, work, ranks, backend, iters)
            seconds[flag].append(got["step_s"])
    ratios = [off / on for on, off in zip(seconds["0"], seconds["1"])]
    params = work.model.num_params()
    rows = [
        {
            "variant": variant,
            "NCCL_P2P_DISABLE": flag,
            "backend": backend,
            "ranks": ranks,
            "parameters": params,
            "ms/step, median [IQR] of launches": Spread.of(seconds[flag]).text(3, 1e3),
        }
        for flag, variant in (("0", "P2P on"), ("1", "P2P off"))
    ]
    for row in rows:
        print0(
            f"{row['variant']:7} ms/step: {row['ms/step, median [IQR] of launches']}"
        )
    print0(f"{_describe(work)}: {params:,} parameters, {rounds} launches each")
    print0(f"{ranks} ranks on {backend}; DDP gradients = full-batch gradients in all ✓")
    said = [f"P2P off was {w}" for w in ("slower", "faster")]
    sentence = ratio_sentence(ratios, "P2P off ÷ P2P on", *said)
    sentence += "" if backend == "nccl" else DRIFT.format(backend)
    print0(textwrap.fill(sentence, 88, subsequent_indent="  "))
    return {
        "tables": {"steps": rows},
        "markdown": {
            "verdict": sentence,
            "where": where(name, ranks, backend, describe_device(backend)),
        },
        "seconds": seconds,
        "ratios": ratios,
        "ratio_off_over_on": statistics.median(ratios),
        "config": {**asdict(work.model), "batch": work.batch},
        "backend": backend,
        "provenance": {"backend": backend, "world_size": ranks},
    }


if __name__ == "__main__":
    raise SystemExit(main_entry(main, SPEC))
