"""Dispatch and combine, drawn from a run: where each token of an MoE layer goes under
expert parallelism, and how it comes back.

Two ranks each feed six tokens to ``ExpertParallelMoE`` (four experts, two a rank,
top-1, capacity factor 1.0, so a popular expert turns tokens away). The layer records
what it did (its ``record``: each kept assignment's token and expert, the dropped ones,
the split sizes), and the frames are built from that record alone:

1. each rank's tokens, in order;
2. routed: the kept ones sorted by expert (the order the exchange sends them in), the
   dropped ones set aside;
3. dispatch: the all-to-all, each arrow one rank's rows to another, landing in the
   receiver in rank order;
4. combine: the same splits reversed; each token back home with its expert's output,
   a dropped token with none.

The oracle is the dense layer's own routing of each rank's tokens in one process: the
last frame's expert for every token must equal it, as must the run's own record.

    python -m snippets run moe_dispatch
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from snippets.core import parts
from snippets.core.chart_style import PALETTE
from snippets.core.cli import main_entry
from snippets.core.player import check_animation, player_data
from snippets.core.runtime import Spec, print0
from snippets.models.moe import MoE, route
from snippets.parallel.experts.expert_parallel import ExpertParallelMoE

SPEC = Spec(
    summary="an MoE layer's dispatch and combine, animated from what ran", world_size=2
)
DIM, EXPERTS, TOKENS, CAPACITY = 8, 4, 6, 1.0
DROPPED = -1  # a token's "expert" when capacity turned it away


def tokens_of(rank: int) -> torch.Tensor:
    return torch.randn(TOKENS, DIM, generator=torch.Generator().manual_seed(10 + rank))


# --8<-- [start:frames]
def frames(records: list[dict], E_local: int) -> list[dict]:
    """The four frames, from each rank's record alone."""
    p = len(records)
    kept = [list(zip(r["token"], r["expert"])) for r in records]  # sorted by expert
    dropped = [[t for t in range(TOKENS) if not r["keep"][t]] for r in records]
    arrived = [  # rank j's buffer after dispatch: rows from rank 0, then 1, …
        [(src, t, e) for src in range(p) for t, e in kept[src] if e // E_local == j]
        for j in range(p)
    ]
    n = max(TOKENS, *(len(a) for a in arrived))

    def row(cells: list[tuple[int, str, int]]) -> dict:  # (rank, words, expert)
        pad = [([], "", None)] * (n - len(cells))
        cells = [([r], w, e) for r, w, e in cells] + pad
        return {
            "cells": [c for c, _, _ in cells],
            "text": [w for _, w, _ in cells],
            "tints": [EXPERTS if e == DROPPED else e for _, _, e in cells],  # key
            "values": [e for _, _, e in cells],
        }

    def frame(label: str, rows: list[dict], messages: list) -> dict:
        keys = ("cells", "text", "tints", "values")
        return {"label": label, "messages": messages} | {
            k: [r[k] for r in rows] for k in keys
        }

    def sends(splits: list[list[int]], action: str) -> list[dict]:
        out = []
        for src, counts in enumerate(splits):
            for dst, count in enumerate(counts):
                start = sum(counts[:dst])
                if dst != src and count:
                    out.append({"src": src, "dst": dst, "start": start,
                                "stop": start + count, "bytes": count * DIM * 4,
                                "action": action})  # fmt: skip
        return out

    home = [{t: e for t, e in kept[r]} for r in range(p)]
    return [
        frame("each rank's tokens, in order",
              [row([(r, f"t{t}", None) for t in range(TOKENS)]) for r in range(p)], []),
        frame("routed: kept tokens sorted by expert, dropped ones (×) set aside",
              [row([(r, f"t{t}", e) for t, e in kept[r]]
                   + [(r, f"t{t}×", DROPPED) for t in dropped[r]]) for r in range(p)],
              []),
        frame("dispatch: one all-to-all sends each row to its expert's rank",
              [row([(s, f"t{t}", e) for s, t, e in arrived[j]]) for j in range(p)],
              sends([r["send"] for r in records], "copy")),
        frame("combine: the splits reversed; each token home with its expert's output",
              [row([(home[r][t] // E_local, f"t{t}", home[r][t]) if t in home[r]
                    else (r, f"t{t}×", DROPPED) for t in range(TOKENS)])
               for r in range(p)],
              sends([r["recv"] for r in records], "copy")),
    ]  # fmt: skip


# --8<-- [end:frames]


def oracle(moe: MoE, p: int) -> list[list[int]]:
    """Each token's expert by the dense layer's routing, one rank's tokens at a time."""
    experts = []
    for r in range(p):
        routed = route(moe.router, tokens_of(r), 1, CAPACITY)
        e = routed.expert.reshape(-1).where(routed.keep.reshape(-1), DROPPED)
        experts.append(e.tolist())
    return experts


def main() -> dict:
    p, rank = dist.get_world_size(), dist.get_rank()
    dense = MoE(DIM, 16, EXPERTS, 1, CAPACITY, seed=5)
    ep = ExpertParallelMoE.from_dense(dense, None)
    ep.record = []
    with torch.no_grad():
        ep(tokens_of(rank))
    records: list = [None] * p
    dist.all_gather_object(records, ep.record[0])
    drawn = frames(records, ep.E_local)
    pad = [None] * (len(drawn[-1]["values"][0]) - TOKENS)
    final = [  # each token's expert as the run recorded it
        [dict(zip(r["token"], r["expert"])).get(t, DROPPED) for t in range(TOKENS)]
        + pad
        for r in records
    ]
    expected = [row + pad for row in oracle(dense, p)]
    anim = player_data(
        drawn,
        inputs=drawn[0]["values"],
        final=final,
        title=f"MoE dispatch and combine: {p} ranks, {EXPERTS} experts, top-1, "
        f"capacity factor {CAPACITY}",
    )
    anim["tints"] = [
        {"name": f"expert {e} (rank {e // ep.E_local})", "color": PALETTE[e]}
        for e in range(EXPERTS)
    ] + [{"name": "dropped", "color": "#9e9e9e"}]
    check_animation(anim, expected)  # the drawn end = the dense layer's routing
    dropped = sum(v == DROPPED for row in expected for v in row)
    crossed = len(drawn[2]["messages"])
    print0(
        f"{p} ranks × {TOKENS} tokens, {EXPERTS} experts, top-1, capacity {CAPACITY}"
    )
    print0(f"dropped by capacity: {dropped}; messages each way: {crossed}")
    print0("the last frame = the dense layer's routing ✓")
    return {"dropped": dropped, "parts": {"player": parts.player(anim)}}


if __name__ == "__main__":
    raise SystemExit(main_entry(main, SPEC))
