"""Where each parallelism cuts an exported graph: roles, layers, stages, rank grid.

``annotate(graph)`` adds what the page needs to paint any choice of degrees: each
module's tensor-parallel role (Megatron's split of a Linear: ``column`` splits the
output features, ``row`` the input features; ``vocab`` splits an embedding's rows),
each module's and operation's ``layer`` (index in the repeated stack of blocks; -1
before it, L after it) and the sizing calculator's bytes per precision. The bytes
themselves are ``overlay_bytes``'s; the page's script (``docs/assets/viewer/
overlay.js``) applies the same rules, and the browser test holds the two equal.

For degrees ``Degrees(dp, tp, pp, cp, zero, sp, ep)`` the ranks are laid out tp
fastest, then cp, pp, dp (rank = ((dp_rank·pp + pp_rank)·cp + cp_rank)·tp + tp_rank),
and layer i of L runs on PP stage ⌊i·pp/L⌋; what comes before the stack is on stage
0, what comes after on stage pp-1.

Expert parallelism is folded over data parallelism, as the mesh folds it
(``snippets.parallel.mesh``): ep divides dp, ep consecutive dp ranks form a group, and
a rank's place in it is dp_rank mod ep. Of a mixture's E experts (a module the export
marked ``moe``), EP rank r holds the contiguous block [r·E/ep, (r+1)·E/ep), as
``ExpertParallelMoE.from_dense`` gives them out. ``annotate`` marks each module of an
expert with its index (``expert``) and leaves it whole under TP, as the mesh and the
sizing calculator do: only the experts are cut further, and by EP alone.
"""

from __future__ import annotations

from dataclasses import dataclass

from snippets.core.errors import UsageError
from snippets.sizing import memory

COLUMN = {"q", "k", "v", "qkv", "c_attn", "q_proj", "k_proj", "v_proj", "query", "key"}
COLUMN |= {"value", "fc", "c_fc", "fc1", "w1", "w3", "gate_proj", "up_proj", "in_proj"}
ROW = {"proj", "o_proj", "out_proj", "c_proj", "down_proj", "fc2", "w2", "wo", "dense"}


@dataclass(frozen=True)
class Degrees:
    dp: int = 1
    tp: int = 1
    pp: int = 1
    cp: int = 1
    zero: int = 0  # ZeRO stage 0-3 over the dp × cp ranks
    sp: bool = False  # sequence parallelism beside tp
    ep: int = 1  # expert parallelism, folded over dp: ep divides dp


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
    """Adds ``tp`` and ``layer`` to each module, ``layer`` to each op, ``stack`` and
    ``sizing`` (bytes per precision, optimizer state) to the graph; returns it."""
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
    graph["sizing"] = {
        "precisions": memory.PRECISIONS,
        "optimizer_state": memory.OPTIMIZER_STATE,
    }
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
    for moe in mixtures(graph):  # experts: whole on every TP rank, split by EP
        experts = moe["moe"]["experts"]
        for i, e in enumerate(experts):
            for m in graph["modules"]:
                if m["id"] == e or m["id"].startswith(e + "."):
                    m["expert"], m["tp"] = {"index": i, "of": len(experts)}, ""
    return graph


def mixtures(graph: dict) -> list[dict]:
    """The modules the export marked as mixtures of experts, in graph order."""
    return [m for m in graph["modules"] if "moe" in m]


def check_ep(d: Degrees) -> None:
    """A one-line UsageError unless ep divides dp (any model)."""
    if d.ep < 1 or d.dp % d.ep:
        raise UsageError(
            f"ep {d.ep} does not divide dp = {d.dp}: expert parallelism folds over "
            "data parallelism"
        )


def check_degrees(graph: dict, d: Degrees) -> None:
    """A one-line UsageError unless the degrees fit the graph's experts."""
    check_ep(d)
    found = mixtures(graph)
    if d.ep > 1 and not found:
        raise UsageError(f"ep {d.ep} needs a model with experts: this one has none")
    for m in found:
        n = len(m["moe"]["experts"])
        if n % d.ep:
            raise UsageError(f"ep {d.ep} does not split the {n} experts of {m['id']}")


def ep_rank(expert: int, n_experts: int, ep: int) -> int:
    """The EP rank holding expert i of E: the contiguous blocks of E/ep."""
    return expert // (n_experts // ep)


def ranks_of_ep_rank(s: int, r: int, d: Degrees) -> list[int]:
    """The ranks of stage s at EP rank r (dp_rank mod ep = r): those holding its
    experts."""
    return sorted(
        ((dp * d.pp + s) * d.cp + c) * d.tp + t
        for dp in range(r, d.dp, d.ep)
        for c in range(d.cp)
        for t in range(d.tp)
    )


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
