"""Expert parallelism on the graph: which rank holds each expert, where the all-to-alls
fire, and what they cost a step.

The overlay (``overlay_bytes``) on the tiny GPT with a mixture of 4 experts in each
block, top-2, at dp = 4, tp = 2, ep = 2, ZeRO-1, and again at ep = 4 with sequence
parallelism. EP rank r of a group of ep consecutive dp ranks holds experts
[r·E/ep, (r+1)·E/ep) of each mixture; each mixture costs two all-to-alls, the dispatch
before its experts and the combine after them, each forward and reversed backward.
The run checks the most loaded rank against the sizing calculator's ``estimate()``
for the same model (the tiny-gpt preset with 4 experts of width 4d, top-2), which
reads the model's dimensions and never sees the graph: model states, TP, DP and EP
bytes; a difference fails the run. The note's viewer opens at the first degrees.

    python -m snippets run overlay_ep
    python -m snippets view tiny_moe_gpt --dp 4 --tp 2 --zero 1 --ep 2
"""

from __future__ import annotations

import math

from snippets.core import parts
from snippets.core.claims import law
from snippets.core.cli import main_entry
from snippets.core.runtime import Spec, print0
from snippets.sizing import presets
from snippets.viewer.graph_export import export_graph
from snippets.viewer.model_viewer import tiny_gpt_inputs, tiny_moe_gpt
from snippets.viewer.overlay_bytes import calculator, collectives, rank_bytes
from snippets.viewer.overlay_cuts import calls_text
from snippets.viewer.parallel_overlay import (
    Degrees,
    annotate,
    ep_rank,
    mixtures,
    ranks_of_ep_rank,
    stage,
)

SPEC = Spec(summary="which rank holds each expert; the all-to-alls = the calculator's")
DEGREES = Degrees(dp=4, tp=2, zero=1, ep=2)
AGAIN = Degrees(dp=4, tp=2, zero=1, sp=True, ep=4)


def calculator_model(graph: dict) -> dict:
    """The tiny-gpt preset with the graph's experts: E of them, top-k, each as wide
    as its first Linear's output."""
    moe = mixtures(graph)[0]
    mods = {m["id"]: m for m in graph["modules"]}
    fc = next(t for t in mods[moe["moe"]["experts"][0] + ".fc"]["tensors"])
    experts = {"experts": len(moe["moe"]["experts"]), "top_k": moe["moe"]["top_k"]}
    return presets.MODELS["tiny-gpt"] | experts | {"expert_ffn": fc["shape"][0]}


# --8<-- [start:placement]
def placement(graph: dict, d: Degrees) -> list[dict]:
    """Each expert of the first mixture: the EP rank holding it, and which ranks of
    the mesh those are (dp rank mod ep = the EP rank, every tp rank)."""
    moe = mixtures(graph)[0]
    experts, s = moe["moe"]["experts"], stage(moe["layer"], d.pp, len(graph["stack"]))
    rows = []
    for i, module in enumerate(experts):
        r = ep_rank(i, len(experts), d.ep)
        ranks = ranks_of_ep_rank(s, r, d)
        rows.append({"ep": d.ep, "expert": module, "EP rank": r, "ranks": str(ranks)})
    return rows


# --8<-- [end:placement]


def all_to_alls(graph: dict, d: Degrees) -> list[dict]:
    """The all-to-alls of the first mixture, with their calls and bytes."""
    first = mixtures(graph)[0]["id"]
    return [
        {
            "ep": d.ep,
            "SP": "on" if d.sp else "off",
            "at": c["at"],
            "collective": c["name"],
            "calls": calls_text(c["calls"]),
            "bytes sent": round(c["bytes"]),
        }
        for c in collectives(graph, d)
        if c["kind"] == "ep" and c["at"] == first
    ]


def check(graph: dict, seq: int, d: Degrees) -> dict:
    """The overlay's most loaded rank against estimate(); returns the overlay's."""
    want = calculator(calculator_model(graph), seq, d)
    top = max(rank_bytes(graph, d), key=lambda r: r["weights"])
    mem, comm = want["memory_bytes"], want["comm_bytes_per_step"]
    got = {"weights": top["weights"], "grads": top["grads"]}
    got |= {"optimizer": top["optimizer"], "TP": top["tp"], "DP": top["dp"]}
    got["EP"] = top["ep"]
    expect = {"weights": mem["weights"], "grads": mem["gradients"]}
    expect |= {"optimizer": mem["optimizer"], "TP": comm["tp"], "DP": comm["dp"]}
    expect["EP"] = comm["ep"]
    for key, value in expect.items():
        law(math.isclose(got[key], value, rel_tol=1e-12), (key, got[key], value))
    return got


def main() -> dict:
    model, args = tiny_moe_gpt(), tiny_gpt_inputs()
    graph = annotate(export_graph(model, args))
    seq, experts, a2a = args[0].shape[1], [], []
    n = len(mixtures(graph))
    print0(f"tiny GPT with {n} mixtures of experts, ZeRO-{DEGREES.zero}, one step:")
    for d in (DEGREES, AGAIN):
        experts += placement(graph, d)
        a2a += all_to_alls(graph, d)
        got = check(graph, seq, d)
        states = got["weights"] + got["grads"] + got["optimizer"]
        sp = "on " if d.sp else "off"
        print0(
            f"  dp={d.dp} tp={d.tp} ep={d.ep} SP {sp}: model states {states:,.0f} B, "
            + ", ".join(f"{k} {got[k]:,.0f} B" for k in ("TP", "DP", "EP"))
        )
    print0("  each = estimate() for the same model and degrees ✓")
    start = {k: int(v) for k, v in DEGREES.__dict__.items() if v != getattr(Degrees, k)}
    return {
        "parts": {"graph": parts.viewer(graph, start)},
        "tables": {"experts": experts, "all_to_alls": a2a},
    }


if __name__ == "__main__":
    raise SystemExit(main_entry(main, SPEC))
