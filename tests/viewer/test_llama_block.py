"""The Llama-style block: its parameter formula, grouped-query attention against the
k, v heads repeated by hand, and the run: an export the viewer draws, its TP roles."""

from __future__ import annotations

import json

import torch
import torch.nn.functional as F

from snippets.render import render
from snippets.viewer.llama_block import LlamaConfig, inputs, llama_block, main, rotate


def test_parameters_match_the_formula_and_shapes_are_kept() -> None:
    block, (x,) = llama_block(), inputs()
    assert sum(p.numel() for p in block.parameters()) == LlamaConfig().num_params()
    assert block(x).shape == x.shape


def test_gqa_equals_attention_with_kv_heads_repeated() -> None:
    cfg, block, (x,) = LlamaConfig(), llama_block(), inputs()
    a, (B, N, _) = block.self_attn, x.shape
    q = a.q_proj(x).view(B, N, cfg.n_head, a.hd).transpose(1, 2)
    k = a.k_proj(x).view(B, N, cfg.n_kv_head, a.hd).transpose(1, 2)
    v = a.v_proj(x).view(B, N, cfg.n_kv_head, a.hd).transpose(1, 2)
    q, k = rotate(q, a.cos[:N], a.sin[:N]), rotate(k, a.cos[:N], a.sin[:N])
    group = cfg.n_head // cfg.n_kv_head
    k, v = k.repeat_interleave(group, 1), v.repeat_interleave(group, 1)
    mask = torch.ones(N, N, dtype=torch.bool).tril()
    s = (q @ k.transpose(-2, -1)) / a.hd**0.5
    ref = torch.softmax(s.masked_fill(~mask, float("-inf")), -1) @ v
    want = a.o_proj(ref.transpose(1, 2).flatten(2))
    torch.testing.assert_close(a(x), want)
    # RoPE keeps norms: each pair turns, none stretches
    torch.testing.assert_close(rotate(q, a.cos[:N], a.sin[:N]).norm(), q.norm())
    assert F.silu(torch.zeros(1)).item() == 0.0


def test_run_checks_the_cuts_and_embeds_the_block() -> None:
    found = main()  # exports, and asserts the calculator's layer formulas
    block = render(found["parts"]["graph"])
    inline = block.split('class="cp-viewer__graph">', 1)[1].split("</script>", 1)[0]
    graph = json.loads(inline.replace("<\\/", "</"))
    assert graph["source"] == "torch.export"
    assert sum(op["op"] == "aten.linear" for op in graph["ops"]) == 7
    assert graph["modules"][0]["params"] == LlamaConfig().num_params()
    roles = {
        r["module"].rsplit(".", 1)[-1]: r["TP split"] for r in found["tables"]["split"]
    }
    column = ("q_proj", "k_proj", "v_proj", "gate_proj", "up_proj")
    assert [roles[n] for n in column] == ["column"] * 5
    assert roles["o_proj"] == roles["down_proj"] == "row"
    assert roles["input_layernorm"] == "replicated"
    assert 'class="cp-viewer__start">{"tp":2,"cp":2}' in block
