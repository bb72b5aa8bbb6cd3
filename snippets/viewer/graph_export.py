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
module's ``tensors``. A module that is shared (one object under two names) is one
entry, by its first name, with the others in ``aliases`` (``module_graph``).

A model neither tracer can capture but that runs eagerly is drawn at module level
(``module_graph``: forward hooks on one real call); the graph then says ``"level":
"module"`` and ``why``, the line of the model that failed and what each tracer said.
"""

from __future__ import annotations

import re
from typing import Any

import torch
import torch.fx
from torch.utils.flop_counter import FlopCounterMode

from snippets.core.errors import UsageError
from snippets.viewer.graph_capture import CaptureError, capture, first_line
from snippets.viewer.module_graph import (
    ancestors,  # noqa: F401 - re-exported: the bench and the tests import it here
    describe,  # noqa: F401 - re-exported, as ancestors
    first_names,
    module_graph,
    module_table,
    roll_up,
)


def op_name(node: torch.fx.Node, gm: torch.fx.GraphModule) -> str:
    if node.op == "call_module":
        return type(gm.get_submodule(node.target)).__name__
    if node.op == "call_method":
        return f"Tensor.{node.target}"
    if isinstance(node.target, torch._ops.OpOverload):
        name = str(node.target)  # aten.linear.default
        return name.removesuffix(".default")
    return getattr(node.target, "__name__", str(node.target))


def module_of(node: torch.fx.Node, names: dict[str, str]) -> str:
    """The deepest module on the node's stack, by the name ``named_modules()`` gives
    it (a shared module's other names map to its first: ``names``)."""
    if node.op == "call_module":
        return names.get(str(node.target), str(node.target))
    stack = node.meta.get("nn_module_stack") or {}
    for fqn, _type in reversed(list(stack.values())):
        fqn = re.sub(r"@\d+$", "", fqn)  # a module called twice: "blocks.0@1"
        while fqn not in names and "." in fqn:
            fqn = fqn.rsplit(".", 1)[0]
        if fqn in names:
            return names[fqn]
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


def export_graph(
    model: torch.nn.Module,
    args: tuple,
    method: str = "auto",
    kwargs: dict | None = None,
) -> dict[str, Any]:
    """The viewer's graph of ``model(*args, **kwargs)``; ``method``: auto, export, fx
    or modules. Auto falls back to modules when neither tracer captures the model."""
    kwargs = kwargs or {}
    if method == "modules":
        return eager_graph(model, args, kwargs, "asked for (--method modules)")
    try:
        gm, values, inputs, source = capture(model, args, method, kwargs)
    except CaptureError as exc:
        if method != "auto":
            raise
        return eager_graph(model, args, kwargs, exc.why)
    try:
        with FlopCounterMode(display=False) as counter, torch.no_grad():
            rec = Recorder(gm, counter)
            rec.run(*values)
    except Exception as exc:  # noqa: BLE001 - the example input does not fit
        raise unfit(model, exc) from None
    modules = module_table(model)
    names = first_names(model)
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
                "module": module_of(n, names),
                "inputs": [a.name for a in n.all_input_nodes if a.name in kept],
                "out": rec.out[n.name],
                "flops": int(rec.flops[n.name]),
            }
        )
        kept.add(n.name)
    roll_up(modules, ops)
    outs = [a.name for a in (output_node.all_input_nodes if output_node else [])]
    return {
        "model": type(model).__name__,
        "source": source,
        "inputs": [{"id": i, "out": rec.out[i]} for i in inputs],
        "outputs": [o for o in outs if o in kept],
        "modules": modules,
        "ops": ops,
    }


def eager_graph(model: torch.nn.Module, args: tuple, kwargs: dict, why: str) -> dict:
    """The module-level graph of one eager call, saying why it is not op level."""
    try:
        graph = module_graph(model, args, kwargs)
    except Exception as exc:  # noqa: BLE001 - the example input does not fit
        raise unfit(model, exc) from None
    return graph | {"source": "forward hooks", "why": why}


def unfit(model: torch.nn.Module, exc: BaseException) -> UsageError:
    return UsageError(
        f"cannot run {type(model).__name__} on the example input: "
        f"{first_line(exc)} (check --input-shape or --example)"
    )
