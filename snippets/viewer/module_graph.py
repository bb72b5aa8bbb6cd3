"""The model as modules: the tree the viewer groups by, and a graph at module level
when no tracer can capture the model.

``module_table(model)`` is the tree: ``named_modules()`` in its order, each module
once under its first name, with the other names it is reachable by (``aliases``: a
block that a ``ModuleList`` and an attribute both hold), the tensors it registers and
the parameters it uses but another module registered first (``tied``). A mixture of
experts (``snippets.models.moe.MoE``) also says which modules are its
experts, in order, and how many each token visits (``moe``: ``experts``, ``top_k``).

``module_graph(model, args, kwargs)`` is the fallback for a model that runs eagerly
but that neither ``torch.export`` nor ``torch.fx`` follows (``nn.Transformer`` with a
causal mask: export guards on a data-dependent check of the mask, fx cannot branch on
a proxy). It runs ``model(*args, **kwargs)`` once, for real, with a forward pre-hook
and hook on every module, inside ``FlopCounterMode``:

- a node is one call of an innermost module (one during which no other module of the
  tree ran), named for it (``decoder.norm()``; ``shared.fc()#2`` for a second call):
  its type, the shapes of what it returned, the FLOPs counted inside it;
- an edge joins the call that made a tensor to each call that took it; code between
  modules (a residual add, a reshape) is followed by a ``TorchFunctionMode`` that
  passes each tensor's makers on to what is computed from it;
- FLOPs counted in a module's own code, outside its children, stay with that module,
  so the root holds what ``FlopCounterMode`` counts around a plain call.

A shared module is hooked once and drawn once; parameters are counted once. The graph
says ``"level": "module"`` and why: the page tells the reader.
"""

from __future__ import annotations

import inspect
import weakref
from typing import Any

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_leaves
from torch.utils.flop_counter import FlopCounterMode

from snippets.models.moe import MoE


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


def ancestors(module_id: str) -> list[str]:
    """``"a.b"`` → ``["a.b", "a", ""]``: the module and every module above it."""
    parts = module_id.split(".") if module_id else []
    return [".".join(parts[:i]) for i in range(len(parts), -1, -1)]


def first_names(model: torch.nn.Module) -> dict[str, str]:
    """Every name a module is reachable by → the name ``named_modules()`` gives it
    (its first): ``blocks.0`` → ``shared``, ``blocks.0.fc`` → ``shared.fc``."""
    first: dict[int, str] = {}
    names = {}
    for name, m in model.named_modules(remove_duplicate=False):
        names[name] = first.setdefault(id(m), name)
    return names


def tensor_entry(leaf: str, kind: str, t: torch.Tensor) -> dict:
    return {
        "name": leaf,
        "kind": kind,
        "shape": list(t.shape),
        "dtype": str(t.dtype).removeprefix("torch."),
        "numel": t.numel(),
        "bytes": t.numel() * t.element_size(),
    }


def module_table(model: torch.nn.Module) -> list[dict]:
    """One entry per module (see the docstring); ``params``, ``bytes`` and ``flops``
    are left for :func:`roll_up`."""
    names = first_names(model)
    own: dict[str, list[dict]] = {name: [] for name, _ in model.named_modules()}
    tied: dict[str, list[dict]] = {name: [] for name in own}
    for kind, named in (
        ("parameter", model.named_parameters()),
        ("buffer", model.named_buffers()),
    ):
        for full, t in named:  # each tensor once, under its first module
            owner, _, leaf = full.rpartition(".")
            own[owner].append(tensor_entry(leaf, kind, t))
    first: dict[int, str] = {}
    for full, t in model.named_parameters(remove_duplicate=False):
        path, _, leaf = full.rpartition(".")
        user, owner = names[path], names[first.setdefault(id(t), path)]
        entry = tensor_entry(leaf, "parameter", t) | {"owner": owner}
        if user != owner and entry not in tied[user]:  # the GPT's head: tok_emb's
            tied[user].append(entry)
    aliases: dict[str, list[str]] = {}
    for name, first_name in names.items():
        parent = name.rpartition(".")[0]
        if name != first_name and names.get(parent) == parent:  # not via an alias
            aliases.setdefault(first_name, []).append(name)
    modules = []
    for name, m in model.named_modules():
        params = [t for t in own[name] if t["kind"] == "parameter"]
        entry = {
            "id": name,
            "name": name.rsplit(".", 1)[-1] if name else type(m).__name__,
            "type": type(m).__name__,
            "parent": name.rpartition(".")[0] if name else None,
            "tensors": own[name],
            "tied": tied[name],
            "own_params": sum(t["numel"] for t in params),
            "own_bytes": sum(t["bytes"] for t in params),
        }
        if name in aliases:
            entry["aliases"] = aliases[name]
        if isinstance(m, MoE):  # the project's mixture: its experts, in order, and k
            prefix = f"{name}.experts." if name else "experts."
            experts = [names[prefix + str(i)] for i in range(len(m.experts))]
            entry["moe"] = {"experts": experts, "top_k": m.top_k}
        modules.append(entry)
    return modules


def roll_up(modules: list[dict], ops: list[dict], extra: dict | None = None) -> None:
    """Each module's ``params``, ``bytes`` and ``flops``: its own and those of every
    module below it; ``extra`` adds FLOPs a module spent outside any node."""
    by_id = {m["id"]: m for m in modules}
    for m in modules:
        m["params"] = m["bytes"] = m["flops"] = 0
    for m in modules:
        for anc in ancestors(m["id"]):
            by_id[anc]["params"] += m["own_params"]
            by_id[anc]["bytes"] += m["own_bytes"]
    flops = [(op["module"], op["flops"]) for op in ops] + list((extra or {}).items())
    for module_id, n in flops:
        for anc in ancestors(module_id):
            by_id[anc]["flops"] += n


def tensors_in(value: Any) -> list[torch.Tensor]:
    return [t for t in tree_leaves(value) if isinstance(t, torch.Tensor)]


class Makers(TorchFunctionMode):
    """Which nodes made each tensor: a weak reference, so a dead tensor's ``id`` that
    a new one reuses is not mistaken for it."""

    def __init__(self) -> None:
        super().__init__()
        self.made: dict[int, tuple[weakref.ref, frozenset[str]]] = {}

    def of(self, value: Any) -> frozenset[str]:
        found: set[str] = set()
        for t in tensors_in(value):
            ref, makers = self.made.get(id(t), (None, frozenset()))
            if ref is not None and ref() is t:
                found |= makers
        return frozenset(found)

    def mark(self, value: Any, makers: frozenset[str]) -> None:
        for t in tensors_in(value):
            self.made[id(t)] = (weakref.ref(t), makers)

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        came = self.of((args, kwargs))
        if came:  # in place: keep what the tensor held too
            for t in tensors_in(out):
                self.mark(t, came | self.of(t))
        return out


def input_names(model: torch.nn.Module, args: tuple, kwargs: dict) -> list[tuple]:
    """(name, tensor) of each example tensor: the forward's parameter names."""
    try:
        bound = inspect.signature(model.forward).bind(*args, **kwargs).arguments
    except TypeError:  # the call itself will say what is wrong
        bound = {f"input_{i}": a for i, a in enumerate(args)} | kwargs
    named = []
    for name, value in bound.items():
        found = tensors_in(value)
        for i, t in enumerate(found):
            named.append((name if len(found) == 1 else f"{name}_{i}", t))
    return named


def module_graph(model: torch.nn.Module, args: tuple, kwargs: dict) -> dict:
    """The viewer's graph of one eager ``model(*args, **kwargs)`` at module level;
    the caller adds ``source`` and ``why``."""
    names = {id(m): n for n, m in model.named_modules()}
    makers, ops, extra, open_calls, handles = Makers(), [], {}, [], []
    calls: dict[str, int] = {}
    inputs = input_names(model, args, kwargs)
    for name, t in inputs:
        makers.mark(t, frozenset([name]))
    taken = {name for name, _ in inputs}

    def before(m, a, kw):
        if open_calls:
            open_calls[-1]["inner"] = True
        start = counter.get_total_flops()
        open_calls.append({"inner": False, "start": start, "children": 0})
        open_calls[-1]["from"] = makers.of((a, kw))

    def after(m, a, kw, out):
        call, name = open_calls.pop(), names[id(m)]
        spent = counter.get_total_flops() - call["start"]
        if open_calls:
            open_calls[-1]["children"] += spent
        if call["inner"]:  # its own code between its children's calls
            extra[name] = extra.get(name, 0) + spent - call["children"]
            return
        k = calls[name] = calls.get(name, 0) + 1  # "shared.fc()", "shared.fc()#2"
        node = (name or type(m).__name__) + "()" + (f"#{k}" if k > 1 else "")
        while node in taken:
            node += "'"
        taken.add(node)
        ops.append(
            {
                "id": node,
                "op": type(m).__name__,
                "module": name,
                "inputs": sorted(call["from"]),
                "out": describe(out),
                "flops": int(spent),
            }
        )
        makers.mark(out, frozenset([node]))

    for m in model.modules():
        handles.append(m.register_forward_pre_hook(before, with_kwargs=True))
        handles.append(m.register_forward_hook(after, with_kwargs=True))
    try:
        with FlopCounterMode(display=False) as counter, torch.no_grad(), makers:
            out = model(*args, **kwargs)
    finally:
        for h in handles:
            h.remove()
    modules = module_table(model)
    roll_up(modules, ops, extra)
    return {
        "model": type(model).__name__,
        "level": "module",
        "inputs": [{"id": name, "out": describe(t)} for name, t in inputs],
        "outputs": sorted(makers.of(out)),
        "modules": modules,
        "ops": ops,
    }
