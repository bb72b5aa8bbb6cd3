"""Where each parallelism cuts an exported graph: owners, collectives, bytes per rank.

``annotate(graph)`` adds what the page needs to paint any choice of degrees: each
module's tensor-parallel role (Megatron's split of a Linear: ``column`` splits the
output features, ``row`` the input features; ``vocab`` splits an embedding's rows) and
each module's and operation's ``layer`` (index in the repeated stack of blocks; -1
before it, L after it). The page's script (``docs/assets/viewer/overlay.js``) then
applies the same rules as the functions below; the browser test holds the two equal.

Rules, for degrees ``Degrees(dp, tp, pp, cp, zero)`` with ranks laid out tp fastest,
then cp, pp, dp (rank = ((dp_rank·pp + pp_rank)·cp + cp_rank)·tp + tp_rank):

* PP stage of layer i of L: ⌊i·pp/L⌋; what comes before the stack is on stage 0, what
  comes after on stage pp-1 (a tied head's weight is counted once, on stage 0).
* Bytes per rank of a stage: ``zero_memory.model_state_bytes`` (the ZeRO paper's
  §5 rule) for each parameter, a TP-split tensor counting 1/tp of its values: weights
  and gradients in the parameter's dtype, Adam's K = 8 bytes a value (12 if the
  weights are not fp32, with an fp32 master copy).
* Collectives per step on one microbatch (the example input), in bytes handed to the
  collective per rank, counted as the ZeRO paper counts values (an all-reduce is a
  reduce-scatter plus an all-gather: twice its tensor): TP all-reduce of each row
  layer's output (forward) and of the input column layers share (backward), the
  activations /cp; PP send/recv of each tensor crossing a stage boundary, forward
  and backward; CP all-gather of K and V (/tp) forward, reduce-scatter of their
  gradients backward; DP ``zero_memory.comm_values`` of each module's local
  parameters (2Ψ for ZeRO 0-2, 3Ψ for ZeRO-3).
"""

from __future__ import annotations

from dataclasses import dataclass

from snippets.parallel.zero_memory import PRECISIONS, comm_values, model_state_bytes

COLUMN = {"q", "k", "v", "qkv", "c_attn", "q_proj", "k_proj", "v_proj", "query", "key"}
COLUMN |= {"value", "fc", "c_fc", "fc1", "w1", "w3", "gate_proj", "up_proj", "in_proj"}
DP_NAMES = [
    "all-reduce grads",
    "reduce-scatter grads, all-gather params",
    "reduce-scatter grads, all-gather params",
    "all-gather params ×2, reduce-scatter grads",
]
ROW = {"proj", "o_proj", "out_proj", "c_proj", "down_proj", "fc2", "w2", "wo", "dense"}


@dataclass(frozen=True)
class Degrees:
    dp: int = 1
    tp: int = 1
    pp: int = 1
    cp: int = 1
    zero: int = 0  # ZeRO stage 0-3 over the dp ranks


def tp_role(module: dict, vocab: int) -> str:
    if module["type"] == "Embedding":
        rows = next((t["shape"][0] for t in module["tensors"]), 0)
        return "vocab" if rows == vocab else ""
    if module["type"] != "Linear":
        return ""
    if module["name"] in ROW:
        return "row"
    return "column" if module["name"] in COLUMN or module["name"] == "lm_head" else ""


def stack_of(graph: dict) -> list[str]:
    """The repeated blocks: the container with the most parameters whose ≥ 2 children
    share one type and have children themselves; else the root's children in the
    order they first run."""
    mods = {m["id"]: m for m in graph["modules"]}
    best, best_params = [], 0
    for m in graph["modules"]:
        kids = [k for k in graph["modules"] if k["parent"] == m["id"] and k["id"]]
        blocks = all(
            any(c["parent"] == k["id"] for c in graph["modules"]) for k in kids
        )
        if len(kids) >= 2 and len({k["type"] for k in kids}) == 1 and blocks:
            if m["params"] > best_params:
                best, best_params = [k["id"] for k in kids], m["params"]
    if best:
        return best
    first = {}
    for i, op in enumerate(graph["ops"]):
        top = op["module"].split(".")[0]
        if top and top in mods:
            first.setdefault(top, i)
    return sorted(first, key=first.get)


def annotate(graph: dict) -> dict:
    """Adds ``tp`` and ``layer`` to each module, ``layer`` to each op; returns it."""
    vocab = max(
        (
            m["tensors"][0]["shape"][0]
            for m in graph["modules"]
            if m["type"] == "Embedding"
        ),
        default=-1,
    )
    stack = stack_of(graph)
    graph["stack"] = stack
    op_index = {op["id"]: i for i, op in enumerate(graph["ops"])}
    start = min(
        (op_index[o["id"]] for o in graph["ops"] if in_stack(o, stack)), default=0
    )

    def layer(module_id: str, at: int) -> int:
        for i, s in enumerate(stack):
            if module_id == s or module_id.startswith(s + "."):
                return i
        return -1 if at < start else len(stack)

    firsts: dict[str, int] = {}
    for op in graph["ops"]:
        op["layer"] = layer(op["module"], op_index[op["id"]])
        firsts.setdefault(op["module"], op_index[op["id"]])
    for m in graph["modules"]:
        m["tp"] = tp_role(m, vocab)
        at = firsts.get(m["id"], start if m["id"] else 0)
        m["layer"] = layer(m["id"], at)
    return graph


def in_stack(op: dict, stack: list[str]) -> bool:
    return any(op["module"] == s or op["module"].startswith(s + ".") for s in stack)


def stage(layer: int, pp: int, n: int) -> int:
    if layer < 0 or n == 0:
        return 0
    return pp - 1 if layer >= n else layer * pp // n


def ranks_of_stage(s: int, d: Degrees) -> list[int]:
    return sorted(
        ((dp * d.pp + s) * d.cp + c) * d.tp + t
        for dp in range(d.dp)
        for c in range(d.cp)
        for t in range(d.tp)
    )


def local_tensors(m: dict, tp: int) -> list[tuple[float, int, int]]:
    """(values on one TP rank, bytes per value, Adam bytes per value) of each of a
    module's own parameters; Adam's K from the ZeRO note (8 fp32, 12 mixed)."""
    found = []
    for t in m["tensors"]:
        if t["kind"] != "parameter" or not t["numel"]:
            continue
        split = (
            m["tp"] in ("column", "vocab") or m["tp"] == "row" and t["name"] != "bias"
        )
        size = t["bytes"] // t["numel"]
        K = PRECISIONS["fp32 Adam" if t["dtype"] == "float32" else "mixed Adam"][2]
        found.append((t["numel"] / (tp if split else 1), size, K))
    return found


def rank_bytes(graph: dict, d: Degrees) -> list[dict]:
    """One row per PP stage: its ranks and what each of them holds, in bytes."""
    n = len(graph["stack"])
    rows = [
        {"stage": s, "ranks": ranks_of_stage(s, d), "weights": 0.0, "grads": 0.0}
        | {"optimizer": 0.0, "tp": 0.0, "pp": 0.0, "cp": 0.0, "dp": 0.0}
        for s in range(d.pp)
    ]
    for m in graph["modules"]:
        row = rows[stage(m["layer"], d.pp, n)]
        for psi, size, K in local_tensors(m, d.tp):
            held = model_state_bytes(d.zero, psi, d.dp, size, size, K)
            row["weights"] += held["parameters"]
            row["grads"] += held["gradients"]
            row["optimizer"] += held["optimizer"]
    for c in collectives(graph, d):
        rows[c["stage"]][c["kind"]] += c["bytes"]
    for row in rows:
        row["total"] = row["weights"] + row["grads"] + row["optimizer"]
    return rows


def collectives(graph: dict, d: Degrees) -> list[dict]:
    """Every collective one step fires: kind, name, where (op or module), bytes/rank."""
    n, found = len(graph["stack"]), []
    mods = {m["id"]: m for m in graph["modules"]}
    ops = {op["id"]: op for op in graph["ops"]}

    def out_bytes(op_id: str) -> int:
        src = ops.get(op_id) or next(i for i in graph["inputs"] if i["id"] == op_id)
        return sum(o["bytes"] for o in src["out"] if o)

    def add(kind, name, at, s, b):
        found.append({"kind": kind, "name": name, "at": at, "stage": s, "bytes": b})

    shared: set[str] = set()
    sent: set[tuple[str, int]] = set()
    for op in graph["ops"]:
        s, role = stage(op["layer"], d.pp, n), mods[op["module"]]["tp"]
        if d.tp > 1 and role in ("row", "vocab"):
            add("tp", "all-reduce (fwd)", op["id"], s, 2 * out_bytes(op["id"]) / d.cp)
        if d.tp > 1 and role == "column":
            for i in op["inputs"]:  # q, k and v share one input: one all-reduce
                if i not in shared:
                    shared.add(i)
                    add("tp", "all-reduce (bwd)", i, s, 2 * out_bytes(i) / d.cp)
        if d.cp > 1 and "scaled_dot_product" in op["op"]:
            kv = sum(out_bytes(i) for i in op["inputs"][1:3])
            add("cp", "all-gather K, V", op["id"], s, 2 * kv / d.tp)
        for i in op["inputs"]:
            up = stage(ops[i]["layer"], d.pp, n) if i in ops else 0
            if d.pp > 1 and up < s and (i, s) not in sent:
                sent.add((i, s))
                add("pp", "send/recv", i, up, 2 * out_bytes(i) / d.cp)
    if d.dp > 1:
        name = DP_NAMES[min(d.zero, 3)]
        for m in graph["modules"]:
            values = sum(psi * size for psi, size, _ in local_tensors(m, d.tp))
            if values:
                at = stage(m["layer"], d.pp, n)
                add("dp", name, m["id"], at, comm_values(d.zero, values))
    return found
