"""Data parallelism and ZeRO on the graph: one marker a parameter-holding node.

``overlay_bytes.collectives`` gives each module that holds parameters its DP calls
(the calculator's ``traffic.dp_calls`` of the values one TP rank holds, over the
dp × cp ranks). Here each call becomes one part of the node's marker, named by the
collective, what it moves and when it fires in a step, with the bytes a rank sends
for it (``traffic.sent_bytes`` of that call alone):

* ZeRO-0 (plain DP): the gradients are all-reduced after the backward pass;
* ZeRO-1: reduce-scattered after it, and the updated weights all-gathered after the
  optimizer step; ZeRO-2 the same, the reduce-scatter firing during the backward;
* ZeRO-3: the weights all-gathered before the forward and again before the backward
  (the shards are dropped in between), the gradients reduce-scattered.

A module's marker sums every part below it, so a collapsed block shows its layers'
total, and ``own`` is the module's own parameters only (what an expanded module's
header shows; its children show the rest). The root's ``bytes`` is the whole
model's, at pp = 1 the calculator's ``comm_bytes_per_step["dp"]``. An expert's
marker is what a rank that holds it sends, over the dp·cp/ep ranks with the same
experts; above the expert (its mixture, its block) each expert counts 1/ep, as a rank
of the stage holds E/ep of them.
"""

from __future__ import annotations

from snippets.sizing import traffic
from snippets.viewer.overlay_bytes import collectives, share

OF = {"all_reduce": "grads", "reduce_scatter": "grads", "all_gather": "params"}
WHEN = {
    (0, "all_reduce"): "after backward",
    (1, "reduce_scatter"): "after backward",
    (1, "all_gather"): "after the step",
    (2, "reduce_scatter"): "during backward",
    (2, "all_gather"): "after the step",
    (3, "all_gather"): "before forward and backward",
    (3, "reduce_scatter"): "during backward",
}
SUMMED = ("calls", "payload", "bytes")


def parts(c: dict, zero: int) -> list[dict]:
    """The collectives of one DP entry of ``collectives``, each with its bytes."""
    return [
        {"collective": kind, "of": OF[kind], "when": WHEN[zero, kind]}
        | {"calls": count, "payload": count * buf}
        | {"bytes": traffic.sent_bytes([(kind, buf, count)], c["group"])}
        for kind, buf, count in c["calls"]
    ]


def dp_markers(graph: dict, d) -> dict[str, dict]:
    """Module id → its DP marker, for every module with parameters at or below it:
    the collective's ``name``, the ``group`` size, ``parts`` (summed over the
    subtree), ``bytes`` a rank sends a step (the subtree's), ``own`` (the module's
    own parameters') and ``stages`` (stage → bytes, when a node spans stages)."""
    mods = {m["id"]: m for m in graph["modules"]}
    found: dict[str, dict] = {}
    for c in collectives(graph, d):
        if c["kind"] != "dp":
            continue
        mine = parts(c, d.zero)
        node = c["at"]
        while node is not None:
            mark = found.setdefault(
                node,
                {"name": c["name"], "group": c["group"], "parts": {}}
                | {"bytes": 0.0, "own": 0.0, "stages": {}},
            )
            part = 1.0 if "expert" in mods[node] else share(mods[c["at"]], d)
            for p in mine:
                key = p["collective"], p["when"]
                zeros = dict.fromkeys(SUMMED, 0.0)
                have = mark["parts"].setdefault(key, p | zeros)
                for k in SUMMED:
                    have[k] += part * p[k]
            mark["bytes"] += part * c["bytes"]
            mark["own"] += c["bytes"] if node == c["at"] else 0.0
            mark["stages"][c["stage"]] = (
                mark["stages"].get(c["stage"], 0.0) + part * c["bytes"]
            )
            node = mods[node]["parent"]
    for mark in found.values():
        mark["parts"] = list(mark["parts"].values())
    return found
