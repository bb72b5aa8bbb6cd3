"""Ring attention's K/V rotation as an animation, with each rank's online-softmax state.

``traced_ring_forward`` is ``ring_forward``'s loop, non-causal, made of the same
pieces (``start_pass``/``finish_pass``, ``visible_block``, ``flash_forward``,
``merge_outputs``), noting after every step the first key of the block it merged
and the running log-sum-exp ℓ of its first query row. The recorder checks that it
computed exactly what ``ring_forward`` computes (bit for bit), names each visiting
block by matching its first key against the full sequence, and draws per rank two
cells: the K/V block it holds, and the blocks its (O, ℓ) has merged so far, with ℓ.
The last frame must hold every block merged and the ℓ that ``ring_forward`` returned,
which must equal ``torch.logsumexp`` of that query's scores over the whole sequence.

    python -m snippets run ring_attention_trace -n 4
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from snippets.attention.flash_algorithms import flash_forward
from snippets.attention.online_softmax import merge_outputs
from snippets.attention.ring_attention import ring_forward
from snippets.attention.ring_pass import finish_pass, start_pass
from snippets.attention.zigzag_layout import visible_block
from snippets.core import parts
from snippets.core.claims import law
from snippets.core.cli import main_entry
from snippets.core.player import check_animation, player_data
from snippets.core.runtime import Spec, device, print0

SPEC = Spec(
    summary="ring attention animated: K/V round the ring, (O, ℓ) merging per rank",
    world_size=4,
    min_world_size=2,
)


# --8<-- [start:traced]
def traced_ring_forward(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, group=None
) -> tuple[torch.Tensor, torch.Tensor, list[tuple[float, float]]]:
    """ring_forward (causal=False) with, per step, (first key of the visiting block,
    ℓ of local query row 0 after merging it)."""
    rank, p = dist.get_rank(group), dist.get_world_size(group)
    n = q.shape[2]
    O = torch.zeros_like(q)  # (B, H, n, d), fp64 inputs here
    L = torch.full(q.shape[:3], float("-inf"), dtype=q.dtype, device=q.device)
    kv, steps = torch.stack([k, v]), []  # (2, B, H, n, d)
    for step in range(p):
        pending = start_pass(kv, group, tag=0) if step < p - 1 else None
        rows, cols, mask = visible_block(step, rank, p, False, n)
        o, lse = flash_forward(
            q[:, :, rows], kv[0][:, :, cols], kv[1][:, :, cols], mask
        )
        O[:, :, rows], L[:, :, rows] = merge_outputs(
            O[:, :, rows], L[:, :, rows], o, lse
        )
        steps.append((kv[0, 0, 0, 0, 0].item(), L[0, 0, 0].item()))
        if pending is not None:
            kv = finish_pass(pending)
    return O, L, steps


# --8<-- [end:traced]


def _frames(owners: list[list[int]], ells: list[list[float]], nbytes: int) -> list:
    """owners[r][s]: whose block rank r merged at step s; ells[r][s]: ℓ after it."""
    p = len(owners)
    frames = [
        {
            "label": "start: each rank holds its own K, V; nothing merged",
            "messages": [],
            "cells": [[[r], []] for r in range(p)],
            "values": [[None, None] for _ in range(p)],
        }
    ]
    for s in range(p):
        last = s == p - 1
        frames.append(
            {
                "label": f"step {s + 1} of {p} · merge the visiting block"
                + ("" if last else ", pass it on"),
                "messages": []
                if last
                else [
                    {"src": r, "dst": (r + 1) % p, "start": 0, "stop": 1}
                    | {"bytes": nbytes, "action": "copy"}
                    for r in range(p)
                ],
                "cells": [
                    [[owners[r][s if last else s + 1]], sorted(owners[r][: s + 1])]
                    for r in range(p)
                ],
                "values": [[None, round(ells[r][s], 4)] for r in range(p)],
            }
        )
    return frames


def record_ring_attention(n: int = 3, d: int = 32) -> dict:
    """Run both ring forwards on one random fp64 sequence of p·n rows (rank r holds
    rows r·n …); return the checked animation (on every rank)."""
    rank, p = dist.get_rank(), dist.get_world_size()
    gen = torch.Generator().manual_seed(7)  # the same full sequence everywhere
    q, k, v = (
        torch.randn(1, 1, p * n, d, generator=gen, dtype=torch.float64).to(device())
        for _ in range(3)
    )
    mine = [t[:, :, rank * n : (rank + 1) * n] for t in (q, k, v)]
    O, L, steps = traced_ring_forward(*mine)
    O_ring, L_ring = ring_forward(*mine, False, None)
    law(torch.equal(O, O_ring) and torch.equal(L, L_ring), "trace ≠ ring_forward")
    scores = q[0, 0, rank * n] @ k[0, 0].T / d**0.5  # (p·n,): query row 0's
    exact = torch.logsumexp(scores, 0).item()
    everyone: list = [None] * p
    dist.all_gather_object(everyone, (steps, L_ring[0, 0, 0].item(), exact))
    firsts = k[0, 0, ::n, 0].tolist()  # block j's first key
    owners = [[firsts.index(key) for key, _ in e[0]] for e in everyone]
    for r in range(p):  # what arrived at step s + 1 is what the left rank had at s
        for s in range(p - 1):
            law(owners[r][s + 1] == owners[(r - 1) % p][s], (r, s, owners))
    nbytes = 2 * mine[1].numel() * mine[1].element_size()  # K and V, one message
    frames = _frames(owners, [[e for _, e in st] for st, _, _ in everyone], nbytes)
    anim = player_data(
        frames,
        inputs=[[None, None] for _ in range(p)],
        final=[[None, round(e[1], 4)] for e in everyone],
        title=f"ring attention, {p} ranks: K, V go round; each rank's (O, ℓ) "
        "merges one block a step (ℓ: its first query's log-sum-exp)",
        slots=["K, V held", "O, ℓ merged"],
    )
    check_animation(anim, [[None, round(e[2], 4)] for e in everyone])
    law(
        all(row[1] == list(range(p)) for row in frames[-1]["cells"]),
        "after p steps every rank has seen every K/V block",
    )
    return anim


def main() -> dict:
    anim = record_ring_attention()
    p, ells = anim["ranks"], [row[1] for row in anim["final"]]
    print0(f"ring attention on {p} ranks, {p} steps: the traced loop == ring_forward")
    print0(f"  every rank merged blocks 0–{p - 1}; first-query ℓ per rank {ells}")
    print0("  == torch.logsumexp over the whole sequence ✓")
    return {"parts": {"animation": parts.player(anim)}, "world_size": p}


if __name__ == "__main__":
    raise SystemExit(main_entry(main, SPEC))
