"""The tiny GPT as the viewer draws it, checked against independent readings.

The exported graph (``graph_export``) must agree with what the model says about itself
when it is not traced: the module tree is ``named_modules()``; the parameters sum to
``sum(p.numel())`` and their bytes to ``sum(p.numel() * p.element_size())``; each
leaf module's operations end in the output a forward hook sees on a real forward; the
FLOPs of the operations sum to what ``FlopCounterMode`` counts around a plain
``model(idx)``; and there are as many ``linear`` operations as ``nn.Linear`` calls.
The run writes the viewer for a note (``results/model_viewer.graph.md``) and, for one
choice of degrees, the bytes per rank the overlay shows.

    python -m snippets run model_viewer
    python -m snippets view tiny_gpt --out model-view
"""

from __future__ import annotations

import torch
from torch.utils.flop_counter import FlopCounterMode

from snippets.core import parts
from snippets.core.claims import law
from snippets.core.cli import main_entry
from snippets.core.parts import Excerpt
from snippets.core.runtime import Spec, print0
from snippets.models.tiny_gpt import GPT, GPTConfig, random_batch
from snippets.viewer.graph_export import export_graph
from snippets.viewer.overlay_bytes import rank_bytes
from snippets.viewer.parallel_overlay import Degrees, annotate

SPEC = Spec(summary="the tiny GPT as a graph to expand; export checked against hooks")
EXAMPLE = Degrees(dp=2, tp=2, pp=2, cp=1, zero=1)  # the degrees of the note's table


def tiny_gpt() -> GPT:
    """The factory ``python -m snippets view tiny_gpt`` uses: the default config."""
    return GPT(GPTConfig())


def tiny_moe_gpt() -> GPT:
    """The factory ``python -m snippets view tiny_moe_gpt`` uses: each MLP a mixture
    of 4 experts, top-2 (the mixture-of-experts note's)."""
    return GPT(GPTConfig(num_experts=4, top_k=2))


def tiny_gpt_inputs() -> tuple[torch.Tensor]:
    """One sequence of ``block_size`` token ids (B, N) = (1, 16)."""
    idx, _ = random_batch(GPTConfig(), 1, seed=0)
    return (idx,)


def hooked_forward(model: torch.nn.Module, args: tuple) -> tuple[dict, dict, int]:
    """A real forward: each leaf module's output shape and call count, and the FLOPs
    ``FlopCounterMode`` counts for the whole call."""
    shapes, calls, handles = {}, {}, []
    for name, m in model.named_modules():
        if name and not list(m.children()):

            def hook(_m, _inp, out, name=name):
                shapes[name] = list(out.shape)
                calls[name] = calls.get(name, 0) + 1

            handles.append(m.register_forward_hook(hook))
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        model(*args)
    for h in handles:
        h.remove()
    return shapes, calls, counter.get_total_flops()


def check(model: torch.nn.Module, args: tuple, graph: dict) -> dict:
    """Every agreement the docstring lists; returns the numbers compared."""
    mods = {m["id"]: m for m in graph["modules"]}
    law(list(mods) == [n for n, _ in model.named_modules()], "module tree")
    params = list(model.parameters())  # each shared tensor once
    numel = sum(p.numel() for p in params)
    nbytes = sum(p.numel() * p.element_size() for p in params)
    law(mods[""]["params"] == numel, (mods[""]["params"], numel))
    law(mods[""]["bytes"] == nbytes, (mods[""]["bytes"], nbytes))
    shapes, calls, flops = hooked_forward(model, args)
    for name, want in shapes.items():
        own = [op for op in graph["ops"] if op["module"] == name]
        law(own and own[-1]["out"][0]["shape"] == want, (name, want))
    total = sum(op["flops"] for op in graph["ops"])
    law(total == flops, (total, flops))
    linears = sum(
        calls.get(n, 0)
        for n, m in model.named_modules()
        if isinstance(m, torch.nn.Linear)
    )
    ops = sum(op["op"] == "aten.linear" for op in graph["ops"])
    law(ops == linears, (ops, linears))
    return {"params": numel, "bytes": nbytes, "flops": total, "linears": linears}


def main() -> dict:
    model, args = tiny_gpt(), tiny_gpt_inputs()
    graph = annotate(export_graph(model, args))
    seen = check(model, args, graph)
    said = Excerpt()  # what the note shows: the graph and its five checks
    said(
        f"{graph['model']} via {graph['source']}: {len(graph['ops'])} operations "
        f"in {len(graph['modules'])} modules"
    )
    said(f"modules = named_modules() ✓; params {seen['params']:,} = sum(numel) ✓")
    said(f"parameter bytes {seen['bytes']:,} = sum(numel · element_size) ✓")
    said(f"FLOPs {seen['flops']:,} = FlopCounterMode on model(idx) ✓")
    said(f"{seen['linears']} linear ops = nn.Linear calls; shapes = hooks ✓")
    d = EXAMPLE
    rows = [
        {"stage": r["stage"], "ranks": ", ".join(map(str, r["ranks"]))}
        | {k: int(r[k]) for k in ("weights", "grads", "optimizer", "total")}
        | {f"{k.upper()} sent": int(r[k]) for k in ("tp", "pp", "dp")}
        for r in rank_bytes(graph, d)
    ]
    print0(f"bytes per rank at dp={d.dp} tp={d.tp} pp={d.pp} ZeRO-{d.zero}:")
    for r in rows:
        print0(f"  stage {r['stage']}: {r['total']:,} model-state bytes")
    return {
        "parts": {"graph": parts.viewer(graph)},
        "tables": {"ranks": rows},
        "excerpts": {"summary": said.lines},
    }


if __name__ == "__main__":
    raise SystemExit(main_entry(main, SPEC))
