"""NVLink vs PCIe: the same DDP training step, once with NCCL peer-to-peer on and once with
``NCCL_P2P_DISABLE=1``, and the ratio of their step times.

With P2P off NCCL may not copy GPU to GPU directly (over NVLink, or PCIe peer to peer);
it stages every chunk through host memory instead. NCCL reads the variable when its
communicator starts, so each variant gets its own fresh set of ranks: the parent sets the
variable, then spawns, and the ranks inherit it.

Before timing, each variant checks that DDP's averaged gradients equal the gradients of
one unsplit model on the whole batch (the oracle). On a CPU both variants run gloo at a
tiny size, so this never rots, but there the two variants are the same transport and the
ratio means nothing.

    python -m snippets.hardware.nvlink_vs_pcie                  # both variants, all GPUs (or 2 CPU ranks)
    NCCL_P2P_DISABLE=1 torchrun --nproc-per-node 8 -m snippets.hardware.nvlink_vs_pcie   # one variant
"""

from __future__ import annotations

import argparse
import copy
import os
from dataclasses import asdict, dataclass

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

from snippets.core.cli import main_entry
from snippets.core.measure import time_it
from snippets.core.runtime import Spec, device, gpu_count, launch, print0

SPEC = Spec(
    summary="DDP step time with NCCL peer-to-peer on vs NCCL_P2P_DISABLE=1",
    world_size=1,
    timeout_s=120,
)


# --8<-- [start:model]
@dataclass(frozen=True)
class GPTConfig:
    vocab: int
    d: int  # model width
    layers: int
    heads: int
    seq: int  # tokens per sequence, N
    batch: int  # sequences per rank, B


SIZES = {
    "tiny": GPTConfig(
        vocab=64, d=32, layers=2, heads=2, seq=16, batch=2
    ),  # CPU: seconds
    "small": GPTConfig(vocab=8192, d=768, layers=6, heads=12, seq=256, batch=8),
}  # ~49M params, 196 MB of grads


class Block(nn.Module):
    """Pre-norm transformer block (GPT-2): x + attn(ln(x)), then x + mlp(ln(x))."""

    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.heads = cfg.heads
        self.ln1, self.ln2 = nn.LayerNorm(cfg.d), nn.LayerNorm(cfg.d)
        self.qkv, self.proj = nn.Linear(cfg.d, 3 * cfg.d), nn.Linear(cfg.d, cfg.d)
        self.mlp = nn.Sequential(
            nn.Linear(cfg.d, 4 * cfg.d), nn.GELU(), nn.Linear(4 * cfg.d, cfg.d)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # x: [B, N, d]
        B, N, d = x.shape
        q, k, v = (
            self.qkv(self.ln1(x)).view(B, N, 3, self.heads, d // self.heads).unbind(2)
        )  # each [B, N, H, d/H]
        a = F.scaled_dot_product_attention(
            q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True
        )
        x = x + self.proj(a.transpose(1, 2).reshape(B, N, d))  # [B, N, d]
        return x + self.mlp(self.ln2(x))


class TinyGPT(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.tok, self.pos = (
            nn.Embedding(cfg.vocab, cfg.d),
            nn.Embedding(cfg.seq, cfg.d),
        )
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.layers))
        self.ln = nn.LayerNorm(cfg.d)

    def forward(
        self, idx: torch.Tensor
    ) -> torch.Tensor:  # idx: [B, N] token ids → logits [B, N, vocab]
        x = self.tok(idx) + self.pos(
            torch.arange(idx.shape[1], device=idx.device)
        )  # [B, N, d]
        for block in self.blocks:
            x = block(x)
        return self.ln(x) @ self.tok.weight.T  # tied embedding as the head


# --8<-- [end:model]


def loss_fn(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(
        model(x).flatten(0, 1), y.flatten()
    )  # mean over the B·N tokens


# --8<-- [start:ddp]
def ddp_step_seconds(cfg: GPTConfig, iters: int = 5) -> dict:
    """On every rank: check DDP's gradients against the full-batch oracle, then time steps."""
    rank, p, dev = dist.get_rank(), dist.get_world_size(), device()
    torch.manual_seed(
        0
    )  # the same initial model and the same global batch on every rank
    model = TinyGPT(cfg).to(dev)
    oracle = copy.deepcopy(model)
    x = torch.randint(
        cfg.vocab, (p * cfg.batch, cfg.seq), device=dev
    )  # [p·B, N], the global batch
    y = torch.randint(cfg.vocab, (p * cfg.batch, cfg.seq), device=dev)
    mine = slice(rank * cfg.batch, (rank + 1) * cfg.batch)  # this rank's shard [B, N]
    ddp = DDP(model, device_ids=[dev] if dev.type == "cuda" else None)

    loss_fn(
        ddp, x[mine], y[mine]
    ).backward()  # DDP all-reduces (averages) the gradients in buckets
    loss_fn(
        oracle, x, y
    ).backward()  # equal shards: the mean of shard means is the full-batch mean
    for (name, got), want in zip(model.named_parameters(), oracle.parameters()):
        scale = want.grad.abs().max().item() + 1e-12
        assert torch.allclose(got.grad, want.grad, rtol=1e-3, atol=1e-4 * scale), (
            f"DDP gradient of {name} is off"
        )

    opt = torch.optim.SGD(ddp.parameters(), lr=1e-3)

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        loss_fn(ddp, x[mine], y[mine]).backward()
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
    p2p_disable: str, cfg: GPTConfig, ranks: int, backend: str, iters: int
) -> dict:
    """Fresh ranks with NCCL_P2P_DISABLE set in the parent before spawning: they inherit it."""
    before = os.environ.get("NCCL_P2P_DISABLE")
    os.environ["NCCL_P2P_DISABLE"] = p2p_disable
    try:
        return launch(
            ddp_step_seconds,
            ranks,
            backend,
            timeout_s=SPEC.timeout_s,
            args=(cfg, iters),
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
        help="model size (auto: small on GPUs)",
    )
    parser.add_argument(
        "--iters", type=int, default=5, help="timed steps per variant (median kept)"
    )


def main(size: str = "auto", iters: int = 5) -> dict:
    if size not in ("auto", *SIZES) or iters < 1:
        raise ValueError(
            f"size must be auto, tiny or small and iters ≥ 1, got {size!r}, {iters}"
        )
    if (
        dist.is_initialized()
    ):  # torchrun or -n N: the variable was fixed before we started
        on_gpu = dist.get_backend() == "nccl"
        cfg = SIZES[
            "small" if size == "auto" and on_gpu else "tiny" if size == "auto" else size
        ]
        got = ddp_step_seconds(cfg, iters)
        print0(
            f"one variant (NCCL_P2P_DISABLE={got['NCCL_P2P_DISABLE']}), {got['ranks']} ranks on {got['backend']}: "
            f"{got['step_s'] * 1e3:.1f} ms/step; DDP gradients = full-batch gradients ✓ "
            f"(run it twice, with and without NCCL_P2P_DISABLE=1, to compare)"
        )
        return {"tables": {"steps": [got]}}
    gpus = gpu_count()
    ranks, backend = (gpus, "nccl") if gpus >= 2 else (2, "gloo")
    cfg = SIZES[
        "small"
        if size == "auto" and backend == "nccl"
        else "tiny"
        if size == "auto"
        else size
    ]
    rows = [run_variant(flag, cfg, ranks, backend, iters) for flag in ("0", "1")]
    ratio = rows[1]["step_s"] / rows[0]["step_s"]
    for row, name in zip(rows, ("P2P on ", "P2P off")):
        row["variant"] = name.strip()
        print0(
            f"{name} (NCCL_P2P_DISABLE={row['NCCL_P2P_DISABLE']}): {row['step_s'] * 1e3:8.2f} ms/step"
        )
    print0(
        f"{ranks} ranks on {backend}, {rows[0]['params']:,} parameters ({cfg}); DDP gradients = "
        f"full-batch gradients in both ✓"
    )
    print0(f"P2P off ÷ P2P on = {ratio:.2f}")
    if backend == "gloo":
        print0(
            "(gloo on a CPU: NCCL_P2P_DISABLE changes nothing here, both variants are the same transport, "
            "so this ratio is noise, not a result)"
        )
    table = [
        {
            "variant": r["variant"],
            "NCCL_P2P_DISABLE": r["NCCL_P2P_DISABLE"],
            "backend": r["backend"],
            "ranks": r["ranks"],
            "parameters": r["params"],
            "ms/step": r["step_s"] * 1e3,
            "÷ P2P on": r["step_s"] / rows[0]["step_s"],
        }
        for r in rows
    ]
    return {
        "tables": {"steps": table},
        "runs": rows,
        "ratio_off_over_on": ratio,
        "config": asdict(cfg),
        "backend": backend,
        "provenance": {"backend": backend, "world_size": ranks},
    }


if __name__ == "__main__":
    raise SystemExit(main_entry(main, SPEC))
