"""Two models nobody here wrote: one that registers a submodule under two names, and
torch's own ``nn.Transformer`` called with a causal mask, which neither tracer
captures. Their graphs against readings that do not trace: ``named_modules()``,
``parameters()``, forward hooks on a separate eager call, ``FlopCounterMode`` around a
plain call, and the data flow ``TransformerEncoderLayer`` writes in its source."""

from __future__ import annotations

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from snippets.core.errors import UsageError
from snippets.viewer.graph_export import export_graph
from snippets.viewer.module_graph import first_names
from snippets.viewer.parallel_overlay import annotate


class Mixer(torch.nn.Module):
    def __init__(self, dim: int = 8) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(dim, dim)

    def forward(self, x):
        return x + torch.relu(self.fc(x))


class SharedBlocks(torch.nn.Module):
    """One Mixer under two names (``shared`` and ``blocks.0``), run under each."""

    def __init__(self) -> None:
        super().__init__()
        self.shared = Mixer()
        self.blocks = torch.nn.ModuleList([self.shared, Mixer()])
        self.head = torch.nn.Linear(8, 3)

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return self.head(self.shared(x))


def shared_inputs() -> tuple[torch.Tensor]:
    return (torch.randn(2, 5, 8),)


def transformer() -> torch.nn.Transformer:
    torch.manual_seed(0)
    return torch.nn.Transformer(
        d_model=16,
        nhead=2,
        num_encoder_layers=2,
        num_decoder_layers=2,
        dim_feedforward=32,
        dropout=0.0,
    ).eval()


def transformer_inputs() -> tuple:
    """The usual call: ``model(src, tgt, tgt_mask=mask)``, sequence first."""
    src, tgt = torch.randn(7, 2, 16), torch.randn(5, 2, 16)
    mask = torch.nn.Transformer.generate_square_subsequent_mask(5)
    return src, tgt, {"tgt_mask": mask}


def hooked(model: torch.nn.Module, args: tuple, kwargs: dict) -> tuple:
    """A separate eager call: every module call's output shape, in call order, and
    which calls ran another module inside them; FlopCounterMode's total."""
    names = {id(m): n for n, m in model.named_modules()}
    calls, depth, handles = [], [], []

    def pre(m, _inp):
        if depth:
            depth[-1][1] = True
        depth.append([names[id(m)], False])

    def post(m, _inp, out):
        name, inner = depth.pop()
        first = out[0] if isinstance(out, tuple) else out
        calls.append((name, list(first.shape), inner))

    for m in model.modules():
        handles += [m.register_forward_pre_hook(pre), m.register_forward_hook(post)]
    with torch.no_grad():
        model(*args, **kwargs)
    for h in handles:
        h.remove()
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        model(*args, **kwargs)
    return calls, counter.get_total_flops()


@pytest.mark.parametrize("method", ["auto", "fx", "modules"])
def test_a_shared_submodule_is_one_module_with_both_names(method) -> None:
    model = SharedBlocks()
    graph = annotate(export_graph(model, shared_inputs(), method))
    mods = {m["id"]: m for m in graph["modules"]}
    assert list(mods) == [n for n, _ in model.named_modules()]
    assert mods["shared"]["aliases"] == ["blocks.0"]
    assert "blocks.0" not in mods and all(not m["tied"] for m in mods.values())
    assert mods[""]["params"] == sum(p.numel() for p in model.parameters())
    assert mods[""]["params"] == 2 * (8 * 8 + 8) + 8 * 3 + 3  # by hand: two Mixers
    assert mods["blocks"]["params"] == 8 * 8 + 8  # blocks.1 alone: blocks.0 is shared
    assert all(op["module"] in mods for op in graph["ops"])
    calls, flops = hooked(model, shared_inputs(), {})
    fc_calls = sum(name == "shared.fc" for name, _, _ in calls)
    if method == "modules":
        fc = [op for op in graph["ops"] if op["module"] == "shared.fc"]
    else:
        fc = [op for op in graph["ops"] if op["op"] in ("aten.linear", "Linear")]
        fc = [op for op in fc if op["module"] == "shared.fc"]
    assert len(fc) == fc_calls == 2  # as blocks.0, then as shared
    assert mods[""]["flops"] == flops


def test_a_model_reachable_by_two_names_maps_each_to_its_first() -> None:
    names = first_names(SharedBlocks())
    assert names["blocks.0"] == "shared" and names["blocks.0.fc"] == "shared.fc"
    assert names["blocks.1.fc"] == "blocks.1.fc"


@pytest.fixture(scope="module")
def seq2seq():
    model, (src, tgt, kwargs) = transformer(), transformer_inputs()
    return (
        model,
        (src, tgt),
        kwargs,
        annotate(export_graph(model, (src, tgt), "auto", kwargs)),
    )


def test_transformer_falls_back_to_module_level_and_says_why(seq2seq) -> None:
    _, _, _, graph = seq2seq
    assert graph["level"] == "module" and graph["source"] == "forward hooks"
    assert "transformer.py" in graph["why"] and "torch.export:" in graph["why"]
    assert [i["id"] for i in graph["inputs"]] == ["src", "tgt", "tgt_mask"]
    with pytest.raises(UsageError, match="cannot capture Transformer"):
        export_graph(*seq2seq[:2], "export", seq2seq[2])


def test_module_level_nodes_are_the_innermost_calls_hooks_see(seq2seq) -> None:
    model, args, kwargs, graph = seq2seq
    calls, flops = hooked(model, args, kwargs)
    innermost = [(name, shape) for name, shape, inner in calls if not inner]
    assert [(op["module"], op["out"][0]["shape"]) for op in graph["ops"]] == innermost
    mods = {m["id"]: m for m in graph["modules"]}
    assert list(mods) == [n for n, _ in model.named_modules()]
    assert mods[""]["params"] == sum(p.numel() for p in model.parameters())
    assert mods[""]["flops"] == flops  # FLOPs outside any node stay with a module
    hand = 2 * 7 * 2 * 16 * 32  # linear1 of an encoder layer: 2·m·k·n
    ops = {op["id"]: op for op in graph["ops"]}
    assert ops["encoder.layers.0.linear1()"]["flops"] == hand


def test_module_level_edges_follow_the_code_between_modules(seq2seq) -> None:
    """TransformerEncoderLayer (norm_first=False): x = norm1(x + _sa_block(x)), then
    x = norm2(x + _ff_block(x)), with _ff_block = dropout2(linear2(dropout(
    activation(linear1(x))))); the decoder's self-attention takes the mask."""
    graph, e = seq2seq[3], "encoder.layers.0."
    module = {op["id"]: op["module"] for op in graph["ops"]}  # one call each here
    inputs = {op["module"]: op["inputs"] for op in graph["ops"]}

    def came(name: str) -> set[str]:  # the modules (or inputs) a call's inputs left
        return {module.get(i, i) for i in inputs[name]}

    assert came(e + "self_attn") == {"src"}
    assert came(e + "norm1") == {"src", e + "dropout1"}
    assert came(e + "linear2") == {e + "dropout"}  # through F.relu
    assert came(e + "norm2") == {e + "norm1", e + "dropout2"}
    assert "tgt_mask" in came("decoder.layers.1.self_attn")
    assert "tgt_mask" not in came("decoder.layers.1.multihead_attn")
    assert "encoder.norm" in came("decoder.layers.0.multihead_attn")
    assert [module[o] for o in graph["outputs"]] == ["decoder.norm"]


def test_a_model_that_does_not_run_eagerly_is_one_line() -> None:
    with pytest.raises(UsageError, match="cannot run Transformer on the example"):
        export_graph(transformer(), (torch.randn(7, 2, 16),), "modules")
