"""The exported graph against readings that do not trace: the module tree, parameter
counts, forward hooks, FlopCounterMode, a hand FLOP formula, and torch.fx."""

from __future__ import annotations

import torch
from torch.utils.flop_counter import FlopCounterMode

from snippets.models.tiny_gpt import GPTConfig
from snippets.viewer.graph_export import ancestors, describe, export_graph


def test_tree_and_parameters_are_the_models(tiny) -> None:
    model, _, graph = tiny
    mods = {m["id"]: m for m in graph["modules"]}
    assert list(mods) == [name for name, _ in model.named_modules()]
    first = {id(p): n for n, p in model.named_parameters()}  # a shared tensor's owner
    for name, m in model.named_modules():
        params = list(m.parameters())
        if any(not first[id(p)].startswith(name) for p in params):
            continue  # holds a tensor registered first elsewhere: the tied head
        assert mods[name]["params"] == sum(p.numel() for p in params), name
        assert mods[name]["bytes"] == sum(p.numel() * p.element_size() for p in params)
    assert mods[""]["params"] == GPTConfig().num_params()
    assert mods["lm_head"]["own_params"] == 0  # tied to tok_emb: counted there
    assert mods["blocks.1.attn"]["parent"] == "blocks.1"


def test_shapes_and_op_counts_match_a_hooked_forward(tiny) -> None:
    model, args, graph = tiny
    seen, calls = {}, {}

    def hook(m, _inp, out):
        seen[m] = list(out.shape)
        calls[m] = calls.get(m, 0) + 1

    leaves = [m for m in model.modules() if not list(m.children())]
    handles = [m.register_forward_hook(hook) for m in leaves]
    with torch.no_grad():
        logits, _ = model(*args)
    for h in handles:
        h.remove()
    names = {m: n for n, m in model.named_modules()}
    for m, shape in seen.items():
        if not list(m.children()):  # a leaf: its last op makes what it returns
            own = [op for op in graph["ops"] if op["module"] == names[m]]
            assert own[-1]["out"][0]["shape"] == shape, names[m]
    out = {op["id"]: op for op in graph["ops"]}[graph["outputs"][0]]
    assert out["out"][0] == describe(logits)[0]
    linear_calls = sum(c for m, c in calls.items() if isinstance(m, torch.nn.Linear))
    assert sum(op["op"] == "aten.linear" for op in graph["ops"]) == linear_calls
    cfg = GPTConfig()
    assert linear_calls == 6 * cfg.n_layer + 1  # q, k, v, proj, fc, proj; the head
    assert sum("scaled_dot_product" in op["op"] for op in graph["ops"]) == cfg.n_layer


def test_flops_sum_to_flop_counter_and_to_the_matmul_formula(tiny) -> None:
    model, args, graph = tiny
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        model(*args)
    assert sum(op["flops"] for op in graph["ops"]) == counter.get_total_flops()
    mods = {m["id"]: m for m in graph["modules"]}
    assert mods[""]["flops"] == counter.get_total_flops()
    B, N = args[0].shape
    d = GPTConfig().n_embd
    assert mods["blocks.0.mlp.fc"]["flops"] == 2 * B * N * d * 4 * d  # 2·m·k·n
    assert mods["lm_head"]["flops"] == 2 * B * N * d * GPTConfig().vocab_size


class Residual(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.up, self.down = torch.nn.Linear(6, 10), torch.nn.Linear(10, 6)

    def forward(self, x):
        return x + self.down(torch.relu(self.up(x)))


def test_export_and_fx_read_the_same_graph() -> None:
    model, x = Residual(), torch.randn(3, 5, 6)
    a, b = export_graph(model, (x,), "export"), export_graph(model, (x,), "fx")
    assert (a["source"], b["source"]) == ("torch.export", "torch.fx")
    assert len(a["ops"]) == len(b["ops"]) == 4
    assert [o["module"] for o in a["ops"]] == [o["module"] for o in b["ops"]]
    assert [o["out"] for o in a["ops"]] == [o["out"] for o in b["ops"]]
    assert [o["flops"] for o in a["ops"]] == [o["flops"] for o in b["ops"]]
    assert a["ops"][-1]["inputs"] == ["x", a["ops"][-2]["id"]]  # the residual edge


def test_ancestors_run_up_to_the_root() -> None:
    assert ancestors("a.b.c") == ["a.b.c", "a.b", "a", ""]
    assert ancestors("") == [""]


def test_node_counts_are_the_tracers_own(tiny) -> None:
    """Each tracer's graph, read here without the viewer: one op per call node, and
    the linear ops run in the modules fx calls, in the same order."""
    model, args, graph = tiny
    ep = torch.export.export(model, args, strict=False)
    calls = [n for n in ep.graph.nodes if n.op == "call_function"]
    assert len(graph["ops"]) == len(calls)
    fx = torch.fx.symbolic_trace(model, concrete_args={"targets": None})
    kinds = ("call_function", "call_method", "call_module")
    fx_calls = [n for n in fx.graph.nodes if n.op in kinds]
    by_fx = export_graph(model, args, "fx")
    assert by_fx["source"] == "torch.fx" and len(by_fx["ops"]) == len(fx_calls)
    linears = [
        str(n.target)
        for n in fx_calls
        if n.op == "call_module"
        and isinstance(model.get_submodule(n.target), torch.nn.Linear)
    ]
    exported = [op["module"] for op in graph["ops"] if op["op"] == "aten.linear"]
    assert exported == linears
    assert sum(op["flops"] for op in by_fx["ops"]) == graph["modules"][0]["flops"]


def test_hierarchy_is_named_modules(tiny) -> None:
    model, _, graph = tiny
    names = dict(model.named_modules())
    for m in graph["modules"]:
        if m["id"]:  # the parent is the module that holds it as a child
            parent = names[m["parent"]]
            assert parent.get_submodule(m["name"]) is names[m["id"]], m["id"]
        assert m["type"] == type(names[m["id"]]).__name__
    assert all(op["module"] in names for op in graph["ops"])
    leaves = {n for n, m in names.items() if n and not list(m.children())}
    ran = {op["module"] for op in graph["ops"]}
    dropout = {n for n in leaves if isinstance(names[n], torch.nn.Dropout)}
    assert leaves - dropout <= ran  # every leaf that computes has its ops
    own = sum(
        t["bytes"]
        for m in graph["modules"]
        for t in m["tensors"]
        if t["kind"] == "parameter"
    )
    assert own == sum(p.numel() * p.element_size() for p in model.parameters())
