"""The overlay's bytes: the sizing calculator's formulas, applied where they fire.

No formula lives here. Each number is one of ``snippets.sizing``'s, fed with the
shapes of the exported graph instead of a model's dimensions:

* Bytes per rank of a PP stage: ``memory.model_states`` of each parameter the stage
  holds (1/tp of a TP-split tensor's values; the ZeRO group is dp × cp, as in
  ``estimate``), at the calculator's bytes for the parameter's precision (fp32
  weights train in fp32, narrower ones in bf16-mixed), and ZeRO-3's gathered block,
  ``memory.zero3_buffer``. A tied weight whose owner is on another stage is held
  twice: the last stage keeps its own copy of the embedding, as Megatron-LM does.
* Collectives of one step of one micro-batch (the example input), each a list of
  ``traffic`` calls and the bytes a rank sends for them (``traffic.sent_bytes``):
  TP at the four places a layer has one (the output of each row-split layer, the
  input its column-split partners share; ``traffic.tp_calls`` of a quarter layer:
  an all-reduce, or with SP an all-gather and a reduce-scatter); PP at each tensor
  crossing a stage boundary (``traffic.pp_calls``: the activation forward and its
  gradient backward); CP at each attention (``traffic.cp_calls``: K and V around
  the ring); DP at each module's parameters (``traffic.dp_calls``); EP at each
  mixture of experts (``traffic.ep_calls`` of half a layer: the dispatch all-to-all
  before the experts and the combine after them, each forward and reversed backward).

A mixture's experts follow the calculator's rules for them (``params``: experts whole
on every TP rank, EP alone splits them): a rank holds E/ep of a layer's experts, their
model states are sharded (ZeRO) and their gradients reduced over the dp·cp/ep ranks
that hold the same experts, and each rank dispatches its share of the tokens,
b·s/(cp·t) of them, k rows each. An expert's DP marker is what a rank that holds it
sends; a rank's row counts the E/ep experts it holds.

Like the calculator, the TP collectives of the vocab-split embedding and head are
left out, and so is the all-reduce that keeps two copies of a tied weight equal.
"""

from __future__ import annotations

import math

from snippets.sizing import memory, presets, traffic
from snippets.sizing.estimate import estimate
from snippets.viewer.parallel_overlay import (
    Degrees,
    check_degrees,
    mixtures,
    ranks_of_stage,
    stage,
)

PLACES = 4  # TP collectives a layer: tp_calls counts 4 a layer a micro-batch
DP_NAMES = [
    "all-reduce grads",
    "reduce-scatter grads, all-gather params",
    "reduce-scatter grads, all-gather params",
    "reduce-scatter grads, all-gather params ×2",
]
COLUMNS = ("weights", "grads", "optimizer", "buffers", "tp", "pp", "cp", "dp", "ep")
EP_NAMES = (
    "dispatch: all-to-all (fwd), reversed (bwd)",
    "combine: all-to-all (fwd), reversed (bwd)",
)


def precision(dtype: str) -> str:
    return "fp32" if dtype == "float32" else "bf16-mixed"


def split_by_tp(m: dict, t: dict) -> bool:
    return m["tp"] in ("column", "vocab") or (m["tp"] == "row" and t["name"] != "bias")


def held(graph: dict, d: Degrees) -> list[tuple[dict, int, float, str]]:
    """(module, stage, values on one TP rank, precision) of every parameter held."""
    n, mods, found = len(graph["stack"]), {m["id"]: m for m in graph["modules"]}, []
    for m in graph["modules"]:
        s = stage(m["layer"], d.pp, n)
        copies = [
            t
            for t in m.get("tied", [])
            if stage(mods[t["owner"]]["layer"], d.pp, n) != s
        ]
        for t in m["tensors"] + copies:
            if t["kind"] == "parameter" and t["numel"]:
                psi = t["numel"] / (d.tp if split_by_tp(m, t) else 1)
                found.append((m, s, psi, precision(t["dtype"])))
    return found


def zero_group(m: dict, d: Degrees) -> int:
    """The ranks sharing a module's parameters: dp × cp; an expert's, dp·cp/ep."""
    return d.dp * d.cp // (d.ep if "expert" in m else 1)


def share(m: dict, d: Degrees) -> float:
    """The fraction of a stage's ranks that hold the module: 1/ep for an expert."""
    return 1 / d.ep if "expert" in m else 1.0


def block_of(module_id: str, stack: list[str]) -> str:
    return next((b for b in stack if (module_id + ".").startswith(b + ".")), "")


# --8<-- [start:rank_bytes]
def rank_bytes(graph: dict, d: Degrees) -> list[dict]:
    """One row per PP stage: its ranks and what each of them holds and sends."""
    check_degrees(graph, d)
    rows = [
        {"stage": s, "ranks": ranks_of_stage(s, d)} | dict.fromkeys(COLUMNS, 0.0)
        for s in range(d.pp)
    ]
    data, mods = graph["sizing"], {m["id"]: m for m in graph["modules"]}
    blocks: dict[tuple[int, str], list[float]] = {}  # [others, experts held]
    for m, s, psi, prec in held(graph, d):
        w, g = (data["precisions"][prec][k] for k in ("weight", "grad"))
        k = data["precisions"][prec]["master"] + data["optimizer_state"]["adam"]
        n, part = zero_group(m, d), share(m, d)
        states = memory.model_states(psi, w, g, k, d.zero, n)
        for col, key in (("weights", "weights"), ("grads", "gradients")):
            rows[s][col] += part * states[key]
        rows[s]["optimizer"] += part * states["optimizer"]
        block = block_of(m["id"], graph["stack"])
        if block:
            sizes = blocks.setdefault((s, block), [0.0, 0.0])
            sizes["expert" in m] += part * psi * w
    for (s, _), (size, experts) in blocks.items():  # the largest block, gathered
        buffer = memory.zero3_buffer(size, 1, d.zero, d.dp * d.cp)  # (ZeRO-3)
        buffer += memory.zero3_buffer(experts, 1, d.zero, d.dp * d.cp // d.ep)
        rows[s]["buffers"] = max(rows[s]["buffers"], buffer)
    for c in collectives(graph, d):
        part = share(mods[c["at"]], d) if c["kind"] == "dp" else 1.0
        rows[c["stage"]][c["kind"]] += part * c["bytes"]
    for row in rows:
        row["total"] = sum(row[k] for k in ("weights", "grads", "optimizer", "buffers"))
    return rows


# --8<-- [end:rank_bytes]


def dims(out: dict, cp: int) -> tuple[float, float, float, float]:
    """(b, s_loc, h, e) of an activation (B, N, …), or (N, h) with b = 1: batch,
    tokens a CP rank holds, width, bytes per value."""
    shape = out["shape"] if len(out["shape"]) >= 3 else [1, *out["shape"]]
    b, s, width = shape[0], shape[1], math.prod(shape[2:])
    return b, s / cp, width, out["bytes"] / (b * s * width)


def collectives(graph: dict, d: Degrees) -> list[dict]:
    """Every collective a step fires: kind, name, where (op or module), its calls,
    its group's size and the bytes one rank sends."""
    check_degrees(graph, d)
    n, found = len(graph["stack"]), []
    mods = {m["id"]: m for m in graph["modules"]}
    ops = {op["id"]: op for op in graph["ops"]} | {i["id"]: i for i in graph["inputs"]}
    sp = d.sp and d.tp > 1

    def add(kind, name, at, s, calls, group):
        bytes_ = traffic.sent_bytes(calls, group)
        found.append(
            {"kind": kind, "name": name, "at": at, "stage": s}
            | {"calls": calls, "group": group, "bytes": bytes_}
        )

    def tp(name, at, s):
        calls = traffic.tp_calls(*dims(ops[at]["out"][0], d.cp), 1 / PLACES, 1, sp)
        add("tp", name, at, s, calls, d.tp)

    shared: set[str] = set()
    sent: set[tuple[str, int]] = set()
    for op in graph["ops"]:
        s, role = stage(op["layer"], d.pp, n), mods[op["module"]]["tp"]
        inside = 0 <= op["layer"] < n
        if d.tp > 1 and inside and role == "row":
            tp("reduce-scatter (fwd), all-gather (bwd)" if sp else "all-reduce (fwd)",
               op["id"], s)  # fmt: skip
        if d.tp > 1 and inside and role == "column":
            for i in op["inputs"][:1]:  # q, k and v share one input: one collective
                if i not in shared:
                    shared.add(i)
                    tp("all-gather (fwd), reduce-scatter (bwd)" if sp
                       else "all-reduce (bwd)", i, s)  # fmt: skip
        if d.cp > 1 and "scaled_dot_product" in op["op"]:
            b, s_loc, h_kv, e = dims4(ops[op["inputs"][1]]["out"][0], d.cp)
            calls = traffic.cp_calls(b, s_loc, h_kv, e, 1, 1, d.cp, d.tp)
            add("cp", "K, V around the ring", op["id"], s, calls, d.cp)
        for i in op["inputs"]:
            up = stage(ops[i]["layer"], d.pp, n) if "layer" in ops[i] else 0
            if d.pp > 1 and up < s and (i, s) not in sent:
                sent.add((i, s))
                calls = traffic.pp_calls(*dims(ops[i]["out"][0], d.cp), 1, d.pp, 1,
                                         d.tp, sp)  # fmt: skip
                add("pp", "send/recv", i, up, calls, 2)
    if d.ep > 1:
        for moe in mixtures(graph):
            x = moe_input(graph, moe["id"], ops)
            b, s_loc, h, e = dims(ops[x]["out"][0], d.cp)
            k, s = moe["moe"]["top_k"], stage(moe["layer"], d.pp, n)
            calls = traffic.ep_calls(b, s_loc, h, e, k, 1 / 2, 1, d.ep, d.tp)
            for name in EP_NAMES:  # half a layer each: before and after the experts
                add("ep", name, moe["id"], s, calls, d.ep)
    if d.dp * d.cp > 1:
        mine: dict[str, list] = {}
        for m, s, psi, prec in held(graph, d):
            mine.setdefault(m["id"], [s, 0.0, prec])[1] += psi
        for mid, (s, psi, prec) in mine.items():
            w, g = (graph["sizing"]["precisions"][prec][k] for k in ("weight", "grad"))
            calls = traffic.dp_calls(psi, w, g, d.zero, 1)
            group = zero_group(mods[mid], d)
            if group > 1:  # an expert whose holders are its ep group's only: none
                add("dp", DP_NAMES[d.zero], mid, s, calls, group)
    return found


def moe_input(graph: dict, moe_id: str, ops: dict) -> str:
    """The tensor a mixture routes: the first input from outside it of the first
    operation inside it."""
    prefix = moe_id + "." if moe_id else ""  # the root: every module

    def inside(module: str | None) -> bool:  # a graph's input is in no module
        return module is not None and (module + ".").startswith(prefix)

    for op in graph["ops"]:
        if inside(op["module"]):
            for i in op["inputs"]:
                if not inside(ops[i].get("module")):
                    return i
    raise ValueError(f"{moe_id or 'the model'} runs no operation on an input")


def dims4(out: dict, cp: int) -> tuple[float, float, float, float]:
    """(b, s_loc, h_kv, e) of attention's K: (B, heads, N, head dim)."""
    B, H, N, hd = out["shape"]
    return B, N / cp, H * hd, out["bytes"] / (B * H * N * hd)


def calculator(model: dict, seq: int, d: Degrees) -> dict:
    """The sizing calculator's answer for degrees ``d``, on the GPU and precision the
    overlay's bytes are drawn for (an H100, fp32): the oracle of every overlay check."""
    return estimate(
        model,
        presets.GPUS["h100-sxm"],
        seq=seq,
        precision="fp32",
        **dict(dp=d.dp, tp=d.tp, pp=d.pp, cp=d.cp, zero=d.zero, ep=d.ep),
        sequence_parallel=d.sp,
    )
