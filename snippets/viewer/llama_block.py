"""A Llama-style transformer block, tiny: a second ready-made target for the viewer.

What differs from the GPT block (``snippets.models.tiny_gpt.Block``): RMSNorm instead of
LayerNorm, no biases, rotary position embedding applied to q and k, grouped-query
attention (``n_kv_head`` < ``n_head``: each k, v head serves ``n_head / n_kv_head``
query heads), and a SwiGLU MLP, ``down(silu(gate(x)) * up(x))``. The names follow
Hugging Face's Llama (``q_proj`` … ``o_proj``, ``gate_proj``, ``up_proj``,
``down_proj``), so the viewer's tensor-parallel roles read them as a user's model would.

The run exports the block, checks what the overlay makes of it at tp = 2, cp = 2
against the sizing calculator's own formulas for a Llama layer (``params.
layer_params``, ``traffic.tp_calls``, ``traffic.cp_calls``: dimensions in, no graph)
and writes the viewer for the note, opened at those degrees.

    python -m snippets run llama_block
    python -m snippets view snippets.viewer.llama_block:llama_block \\
        --example snippets.viewer.llama_block:inputs
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from snippets.core import parts
from snippets.core.claims import law
from snippets.core.cli import main_entry
from snippets.core.runtime import Spec, print0
from snippets.sizing import params, traffic
from snippets.viewer.graph_export import export_graph
from snippets.viewer.overlay_bytes import collectives, held
from snippets.viewer.parallel_overlay import Degrees, annotate

SPEC = Spec(summary="a Llama-style block as a graph; its TP and CP cuts, checked")
DEGREES = Degrees(tp=2, cp=2)


@dataclass(frozen=True)
class LlamaConfig:
    n_embd: int = 32  # d
    n_head: int = 4  # H query heads
    n_kv_head: int = 2  # key/value heads (GQA); divides n_head
    ffn: int = 64  # SwiGLU hidden width
    seq_len: int = 16  # N, for the example input and the rotary table
    rope_base: float = 10000.0

    def num_params(self) -> int:
        d, kv = self.n_embd, self.n_embd // self.n_head * self.n_kv_head
        return 2 * d + 2 * d * d + 2 * d * kv + 3 * d * self.ffn


# --8<-- [start:block]
def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """RoPE on (B, H, N, hd): the halves' pairs (x1, x2) turn by angle θ_i·n."""
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)


class Attention(nn.Module):
    def __init__(self, cfg: LlamaConfig):
        super().__init__()
        d, self.hd = cfg.n_embd, cfg.n_embd // cfg.n_head
        self.q_proj = nn.Linear(d, cfg.n_head * self.hd, bias=False)
        self.k_proj = nn.Linear(d, cfg.n_kv_head * self.hd, bias=False)
        self.v_proj = nn.Linear(d, cfg.n_kv_head * self.hd, bias=False)
        self.o_proj = nn.Linear(cfg.n_head * self.hd, d, bias=False)
        inv = cfg.rope_base ** (-torch.arange(0, self.hd, 2) / self.hd)  # (hd/2,)
        angles = torch.outer(torch.arange(cfg.seq_len), inv)  # (N, hd/2)
        self.register_buffer("cos", angles.cos(), persistent=False)
        self.register_buffer("sin", angles.sin(), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, N, d)
        B, N, _ = x.shape
        q = self.q_proj(x).view(B, N, -1, self.hd).transpose(1, 2)  # (B, H, N, hd)
        k = self.k_proj(x).view(B, N, -1, self.hd).transpose(1, 2)  # (B, Hkv, N, hd)
        v = self.v_proj(x).view(B, N, -1, self.hd).transpose(1, 2)
        cos, sin = self.cos[:N], self.sin[:N]
        q, k = rotate(q, cos, sin), rotate(k, cos, sin)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        return self.o_proj(a.transpose(1, 2).flatten(2))  # (B, N, d)


class SwiGLU(nn.Module):
    def __init__(self, cfg: LlamaConfig):
        super().__init__()
        self.gate_proj = nn.Linear(cfg.n_embd, cfg.ffn, bias=False)
        self.up_proj = nn.Linear(cfg.n_embd, cfg.ffn, bias=False)
        self.down_proj = nn.Linear(cfg.ffn, cfg.n_embd, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class LlamaBlock(nn.Module):
    """Pre-norm: x + attn(norm(x)), then x + mlp(norm(x))."""

    def __init__(self, cfg: LlamaConfig):
        super().__init__()
        self.input_layernorm = nn.RMSNorm(cfg.n_embd)
        self.self_attn = Attention(cfg)
        self.post_attention_layernorm = nn.RMSNorm(cfg.n_embd)
        self.mlp = SwiGLU(cfg)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.self_attn(self.input_layernorm(x))
        return x + self.mlp(self.post_attention_layernorm(x))


# --8<-- [end:block]


def llama_block() -> LlamaBlock:
    """The factory ``python -m snippets view`` calls."""
    torch.manual_seed(0)
    return LlamaBlock(LlamaConfig())


def inputs() -> tuple[torch.Tensor]:
    """An example input: one sequence of N positions, width d."""
    cfg = LlamaConfig()
    return (torch.randn(1, cfg.seq_len, cfg.n_embd),)


def split_rows(graph: dict, d: Degrees) -> list[dict]:
    """Each module with parameters: its TP role and its values on one TP rank."""
    local: dict[str, float] = {}
    for m, _, psi, _ in held(graph, d):
        local[m["id"]] = local.get(m["id"], 0.0) + psi
    return [
        {"module": m["id"], "type": m["type"], "TP split": m["tp"] or "replicated"}
        | {"params": m["own_params"], f"on one of {d.tp} ranks": round(local[m["id"]])}
        for m in graph["modules"]
        if m["id"] in local
    ]


def main() -> dict:
    cfg, d = LlamaConfig(), DEGREES
    (x,) = inputs()
    graph = annotate(export_graph(llama_block(), (x,)))
    h, kv_width, (B, N, _) = (
        cfg.n_embd,
        cfg.n_embd // cfg.n_head * cfg.n_kv_head,
        x.shape,
    )
    local = sum(psi for _, _, psi, _ in held(graph, d))
    want = params.layer_params("llama", h, cfg.n_head, cfg.n_kv_head, cfg.ffn, 0, d.tp)
    law(local == want, (local, want))
    sent = {k: 0.0 for k in ("tp", "pp", "cp", "dp")}
    for c in collectives(graph, d):
        sent[c["kind"]] += c["bytes"]
    e = x.element_size()
    tp_want = traffic.sent_bytes(traffic.tp_calls(B, N / d.cp, h, e, 1, 1), d.tp)
    cp_want = traffic.cp_calls(B, N / d.cp, kv_width, e, 1, 1, d.cp, d.tp)
    law(math.isclose(sent["tp"], tp_want, rel_tol=1e-12), (sent["tp"], tp_want))
    law(
        math.isclose(sent["cp"], traffic.sent_bytes(cp_want, d.cp), rel_tol=1e-12),
        "CP's bytes sent equal the ring formula's",
    )
    print0(f"{graph['model']}: {len(graph['ops'])} ops, {cfg.num_params():,} params")
    print0(f"at tp={d.tp}: {local:,.0f} params a rank = params.layer_params ✓")
    print0(
        f"at tp={d.tp} cp={d.cp}: TP {sent['tp']:,.0f} B = traffic.tp_calls ✓, "
        f"CP {sent['cp']:,.0f} B = traffic.cp_calls ✓"
    )
    ratio = cfg.n_head / cfg.n_kv_head
    print0(
        f"GQA: {cfg.n_kv_head} K, V heads for {cfg.n_head}: ring traffic / {ratio:g}"
    )
    start = {"tp": d.tp, "cp": d.cp}
    return {
        "parts": {"graph": parts.viewer(graph, start)},
        "tables": {"split": split_rows(graph, d)},
    }


if __name__ == "__main__":
    raise SystemExit(main_entry(main, SPEC))
