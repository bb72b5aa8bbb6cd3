"""The tiny GPT with mixture-of-experts blocks on four ranks, expert parallel beside
each other axis in turn: dp 4 (ep 2 × 2 replicas of each expert), dp 2 × tp 2 under
sequence parallel, and dp 2 × pp 2, with ep = 2 folded over dp every time. Each run
is ``gpt_3d.train`` against one process that trains the same seed on the same batch,
its loss the cross-entropy plus α times every block's balance loss; the table shows
the first and last loss and the largest relative differences, and a run outside
the tolerance (1e-10, fp64) exits 1.

    python -m snippets run gpt_3d_moe                    # 4 ranks
    python -m snippets run gpt_3d -n 4 --dp 2 --pp 2 --tp 1 --experts 4 --top-k 2 --ep 2
"""

from __future__ import annotations

import argparse
import dataclasses

import torch
import torch.distributed as dist

from snippets.core.claims import LawBroken
from snippets.core.cli import main_entry, positive_int
from snippets.core.runtime import Spec, UsageError, print0
from snippets.models.tiny_gpt import random_batch
from snippets.parallel import gpt_3d
from snippets.parallel.mesh import Mesh

SPEC = Spec(
    summary="the MoE GPT, ep 2 beside dp, tp and pp on 4 ranks = one process",
    world_size=4,
    min_world_size=4,
)
SHAPES = {  # label → (dp, pp, tp); ep = 2 divides dp in each
    "dp 4 (2 × ep 2)": (4, 1, 1),
    "dp 2 (ep 2) × tp 2, SP": (2, 1, 2),
    "dp 2 (ep 2) × pp 2": (2, 2, 1),
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--experts", type=positive_int, default=4, metavar="E")
    parser.add_argument("--top-k", type=positive_int, default=2, metavar="K")
    parser.add_argument("--steps", type=positive_int, default=3)


def main(experts: int = 4, top_k: int = 2, steps: int = 3) -> dict:
    world = dist.get_world_size()
    if world != 4:
        raise UsageError(f"the three meshes need 4 ranks, not {world}: use -n 4")
    cfg = dataclasses.replace(gpt_3d.CFG, num_experts=experts, top_k=top_k)
    data, tol = [random_batch(cfg, 8)] * steps, gpt_3d.TOLERANCE[torch.float64]
    table, bad = [], []
    for label, (dp, pp, tp) in SHAPES.items():
        gpt_3d.check_shape(world, dp, pp, 1, tp, cfg, 8, 2, 1, "1f1b", True,
                           2, experts, top_k)  # fmt: skip
        mesh = Mesh(dp, pp, 1, tp, ep=2)
        rows, d_params = gpt_3d.train(mesh, "1f1b", 2, 1, data, torch.float64,
                                      "adam", True, cfg)  # fmt: skip
        bad += [f"{label}: {f}" for f in gpt_3d.failures(rows, d_params, tol)]
        table.append({
            "mesh": label,
            "first loss": round(rows[0]["loss"], 12),
            "last loss": round(rows[-1]["loss"], 12),
            "one process, last": round(rows[-1]["reference_loss"], 12),
            "max Δ loss": f"{max(r['d_loss'] for r in rows):.0e}",
            "max Δ grads": f"{max(r['d_grads'] for r in rows):.0e}",
            "Δ params": f"{d_params:.0e}",
            "losses": [r["loss"] for r in rows],
            "reference_losses": [r["reference_loss"] for r in rows],
        })  # fmt: skip
    c = cfg
    print0(
        f"tiny GPT L={c.n_layer} H={c.n_head} d={c.n_embd}, {experts} experts "
        f"top-{top_k}, α={c.aux_loss_coef}; fp64 Adam, 1f1b m=2, {steps} steps"
    )
    print0(f"{'mesh (4 ranks)':<24}{'loss, first → last':>34}{'Δ loss':>9}"
           f"{'Δ grads':>9}{'Δ params':>9}")  # fmt: skip
    for r in table:
        losses = f"{r['first loss']:.12f} → {r['last loss']:.12f}"
        print0(f"{r['mesh']:<24}{losses:>34}{r['max Δ loss']:>9}"
               f"{r['max Δ grads']:>9}{r['Δ params']:>9}")  # fmt: skip
    print0(f"each = one process with the balance loss; tolerance {tol:g} "
           f"{'✗' if bad else '✓'}")  # fmt: skip
    if bad:  # every rank has the same numbers: all fail together
        raise LawBroken(f"MoE run ≠ one process beyond {tol:g}: {', '.join(bad)}")
    shown = [{k: v for k, v in r.items() if "losses" not in k} for r in table]
    provenance = {"backend": dist.get_backend(), "world_size": world}
    return {"tables": {"meshes": shown}, "runs": table, "provenance": provenance}


if __name__ == "__main__":
    raise SystemExit(main_entry(main, SPEC))
