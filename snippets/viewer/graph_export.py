"""A module and an example input → the graph the model viewer draws.

``export_graph(model, args)`` captures the forward pass with ``torch.export`` (ATen
operations; each node's ``nn_module_stack`` says which module ran it) and, if that
fails, with ``torch.fx.symbolic_trace``. It then runs the captured graph once, node by
node, inside ``FlopCounterMode``, so every operation gets the shapes and dtypes of what
it produced and the FLOPs it cost. What it returns is plain JSON::

    {"model": "GPT", "source": "torch.export", "inputs": [...], "outputs": [...],
     "modules": [{"id": "blocks.0.attn", "parent": "blocks.0", "type": ..., "params":
                  ..., "bytes": ..., "flops": ..., "tensors": [...]}, ...],
     "ops": [{"id": "linear", "op": "aten.linear", "module": "blocks.0.attn.q",
              "inputs": ["layer_norm"], "out": [{"shape": [1, 16, 32], ...}],
              "flops": 2048}, ...]}

``modules`` is ``named_modules()`` in its order (the root has id ``""``); ``params``
and ``bytes`` count each parameter once, under the module that registers it first, and
sum up the tree, so the root holds ``sum(p.numel())`` even with tied weights; a
module's ``tied`` lists those it uses but does not own (a pipeline stage may need its
own copy). Parameter and buffer placeholders are not operations: they live in their
module's ``tensors``.

A model neither tracer can capture is a ``UsageError``: one line naming the line of the
model that failed and what each tracer said.
"""

from __future__ import annotations

import re
from typing import Any

import torch
import torch.fx
from torch.utils.flop_counter import FlopCounterMode

from snippets.core.errors import UsageError
from snippets.viewer.graph_capture import capture, first_line


def describe(value: Any) -> list[dict | None]:
    """What a node produced: one entry per output, ``None`` for a non-tensor."""
    items = value if isinstance(value, (tuple, list)) else [value]
    return [
        {
            "shape": list(v.shape),
            "dtype": str(v.dtype).removeprefix("torch."),
            "bytes": v.numel() * v.element_size(),
        }
        if isinstance(v, torch.Tensor)
        else None
        for v in items
    ]


def op_name(node: torch.fx.Node, gm: torch.fx.GraphModule) -> str:
    if node.op == "call_module":
        return type(gm.get_submodule(node.target)).__name__
    if node.op == "call_method":
        return f"Tensor.{node.target}"
    if isinstance(node.target, torch._ops.OpOverload):
        name = str(node.target)  # aten.linear.default
        return name.removesuffix(".default")
    return getattr(node.target, "__name__", str(node.target))


def module_of(node: torch.fx.Node, known: set[str]) -> str:
    """The deepest module on the node's stack that ``named_modules()`` knows."""
    if node.op == "call_module":
        return str(node.target)
    stack = node.meta.get("nn_module_stack") or {}
    for fqn, _type in reversed(list(stack.values())):
        fqn = re.sub(r"@\d+$", "", fqn)  # a module called twice: "blocks.0@1"
        while fqn not in known and "." in fqn:
            fqn = fqn.rsplit(".", 1)[0]
        if fqn in known:
            return fqn
    return ""


# --8<-- [start:recorder]
class Recorder(torch.fx.Interpreter):
    """Runs a graph and keeps, per node, what it produced and the FLOPs it counted."""

    def __init__(self, gm: torch.fx.GraphModule, counter: FlopCounterMode):
        super().__init__(gm)
        self.counter, self.out, self.flops = counter, {}, {}

    def run_node(self, n: torch.fx.Node) -> Any:
        before = self.counter.get_total_flops()
        value = super().run_node(n)
        self.flops[n.name] = self.counter.get_total_flops() - before
        self.out[n.name] = describe(value)
        return value


# --8<-- [end:recorder]


def param_table(model: torch.nn.Module) -> dict[str, list[dict]]:
    """Module id → the tensors it registers itself (shared ones counted once)."""
    table: dict[str, list[dict]] = {name: [] for name, _ in model.named_modules()}
    for kind, named in (
        ("parameter", model.named_parameters()),
        ("buffer", model.named_buffers()),
    ):
        for full, t in named:
            owner, _, leaf = full.rpartition(".")
            table[owner].append(
                {
                    "name": leaf,
                    "kind": kind,
                    "shape": list(t.shape),
                    "dtype": str(t.dtype).removeprefix("torch."),
                    "numel": t.numel(),
                    "bytes": t.numel() * t.element_size(),
                }
            )
    return table


def tied_table(model: torch.nn.Module) -> dict[str, list[dict]]:
    """Module id → the parameters it uses but another module registered first (the
    GPT's head reuses the token embedding): ``owner`` names that module."""
    first: dict[int, str] = {}
    table: dict[str, list[dict]] = {name: [] for name, _ in model.named_modules()}
    for full, t in model.named_parameters(remove_duplicate=False):
        if id(t) not in first:
            first[id(t)] = full
            continue
        owner, _, leaf = full.rpartition(".")
        table[owner].append(
            {
                "name": leaf,
                "kind": "parameter",
                "owner": first[id(t)].rpartition(".")[0],
                "shape": list(t.shape),
                "dtype": str(t.dtype).removeprefix("torch."),
                "numel": t.numel(),
                "bytes": t.numel() * t.element_size(),
            }
        )
    return table


def export_graph(
    model: torch.nn.Module, args: tuple, method: str = "auto"
) -> dict[str, Any]:
    """The viewer's graph of ``model(*args)``; ``method``: auto, export or fx."""
    gm, values, inputs, source = capture(model, args, method)
    try:
        with FlopCounterMode(display=False) as counter, torch.no_grad():
            rec = Recorder(gm, counter)
            rec.run(*values)
    except Exception as exc:  # noqa: BLE001 - the example input does not fit
        raise UsageError(
            f"cannot run {type(model).__name__} on the example input: "
            f"{first_line(exc)} (check --input-shape or --example)"
        ) from None
    tensors, tied = param_table(model), tied_table(model)
    known = set(tensors)
    ops, kept = [], set(inputs)
    output_node = None
    for n in gm.graph.nodes:
        if n.op == "output":
            output_node = n
        if n.op not in ("call_function", "call_method", "call_module"):
            continue
        ops.append(
            {
                "id": n.name,
                "op": op_name(n, gm),
                "module": module_of(n, known),
                "inputs": [a.name for a in n.all_input_nodes if a.name in kept],
                "out": rec.out[n.name],
                "flops": int(rec.flops[n.name]),
            }
        )
        kept.add(n.name)
    modules = []
    for name, m in model.named_modules():
        own = tensors[name]
        modules.append(
            {
                "id": name,
                "name": name.rsplit(".", 1)[-1] if name else type(m).__name__,
                "type": type(m).__name__,
                "parent": name.rpartition(".")[0] if name else None,
                "tensors": own,
                "tied": tied[name],
                "own_params": sum(t["numel"] for t in own if t["kind"] == "parameter"),
                "own_bytes": sum(t["bytes"] for t in own if t["kind"] == "parameter"),
            }
        )
    by_id = {m["id"]: m for m in modules}
    for m in modules:
        m["params"] = m["bytes"] = m["flops"] = 0
    for m in modules:  # own counts flow up to every ancestor
        for anc in ancestors(m["id"]):
            by_id[anc]["params"] += m["own_params"]
            by_id[anc]["bytes"] += m["own_bytes"]
    for op in ops:
        for anc in ancestors(op["module"]):
            by_id[anc]["flops"] += op["flops"]
    outs = [a.name for a in (output_node.all_input_nodes if output_node else [])]
    return {
        "model": type(model).__name__,
        "source": source,
        "inputs": [{"id": i, "out": rec.out[i]} for i in inputs],
        "outputs": [o for o in outs if o in kept],
        "modules": modules,
        "ops": ops,
    }


def ancestors(module_id: str) -> list[str]:
    """``"a.b"`` → ``["a.b", "a", ""]``: the module and every module above it."""
    parts = module_id.split(".") if module_id else []
    return [".".join(parts[:i]) for i in range(len(parts), -1, -1)]
