"""Where TP and PP cut the tiny GPT's block, and the bytes each cut costs a step.

The overlay (``overlay_bytes``) on the exported tiny GPT at tp = 2, pp = 2 (dp = 2,
ZeRO-1), without and with sequence parallelism: every collective one layer fires,
where it fires and what one rank sends for it. The run then checks the overlay's
totals against the sizing calculator's ``estimate()`` for the same configuration,
which reads the model's dimensions and never sees the graph: a difference fails
the run. The note's viewer opens at these degrees.

    python -m snippets run overlay_cuts
"""

from __future__ import annotations

import math

from snippets.core import parts
from snippets.core.claims import law
from snippets.core.cli import main_entry
from snippets.core.runtime import Spec, print0
from snippets.sizing import presets
from snippets.viewer.graph_export import export_graph
from snippets.viewer.model_viewer import tiny_gpt, tiny_gpt_inputs
from snippets.viewer.overlay_bytes import calculator, collectives, rank_bytes
from snippets.viewer.parallel_overlay import Degrees, annotate

SPEC = Spec(summary="where TP and PP cut a GPT block; the bytes = the calculator's")
DEGREES = Degrees(dp=2, tp=2, pp=2, cp=1, zero=1)


def calls_text(calls: list) -> str:
    return " + ".join(f"{n:g} × {kind} of {buf:,.0f} B" for kind, buf, n in calls)


def layer_rows(graph: dict, d: Degrees) -> list[dict]:
    """The collectives of the first block and the boundary after it, in run order."""
    ops = {op["id"]: op for op in graph["ops"]}
    rows = []
    for c in collectives(graph, d):
        where = ops[c["at"]]["module"] if c["at"] in ops else c["at"]
        if c["kind"] in ("tp", "pp") and where.startswith(graph["stack"][0]):
            rows.append(
                {
                    "SP": "on" if d.sp else "off",
                    "kind": c["kind"].upper(),
                    "after": f"{where} ({ops[c['at']]['op']})",
                    "collective": c["name"],
                    "calls": calls_text(c["calls"]),
                    "bytes sent": round(c["bytes"]),
                }
            )
    return rows


def check(graph: dict, seq: int, d: Degrees) -> dict:
    """The overlay's most loaded rank against estimate(); returns the overlay's."""
    want = calculator(presets.MODELS["tiny-gpt"], seq, d)
    rows = rank_bytes(graph, d)
    top = max(rows, key=lambda r: r["weights"])
    got = {"model states": top["total"], "TP": top["tp"], "DP": top["dp"]}
    got["PP"] = rows[0]["pp"]
    mem, comm = want["memory_bytes"], want["comm_bytes_per_step"]
    states = mem["weights"] + mem["gradients"] + mem["optimizer"] + mem["buffers"]
    expect = {"model states": states, "TP": comm["tp"], "DP": comm["dp"]}
    expect["PP"] = comm["pp"]
    for key, value in expect.items():
        law(math.isclose(got[key], value, rel_tol=1e-12), (key, got[key], value))
    return got


def main() -> dict:
    model, args = tiny_gpt(), tiny_gpt_inputs()
    graph = annotate(export_graph(model, args))
    seq, rows = args[0].shape[1], []
    d = DEGREES
    print0(f"tiny GPT at dp={d.dp} tp={d.tp} pp={d.pp} ZeRO-{d.zero}, one step:")
    for sp in (False, True):
        here = Degrees(d.dp, d.tp, d.pp, d.cp, d.zero, sp)
        rows += layer_rows(graph, here)
        got = check(graph, seq, here)
        print0(
            f"  SP {'on ' if sp else 'off'}: "
            + ", ".join(f"{k} {v:,.0f} B" for k, v in got.items())
            + " = estimate() ✓"
        )
    start = {"dp": d.dp, "tp": d.tp, "pp": d.pp, "zero": d.zero}
    return {"parts": {"graph": parts.viewer(graph, start)}, "tables": {"cuts": rows}}


if __name__ == "__main__":
    raise SystemExit(main_entry(main, SPEC))
