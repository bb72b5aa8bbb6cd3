"""A Llama-style transformer block, tiny: a second ready-made target for the viewer.

What differs from the GPT block (``snippets.models.tiny_gpt.Block``): RMSNorm instead of
LayerNorm, no biases, rotary position embedding applied to q and k, grouped-query
attention (``n_kv_head`` < ``n_head``: each k, v head serves ``n_head / n_kv_head``
query heads), and a SwiGLU MLP, ``down(silu(gate(x)) * up(x))``. The names follow
Hugging Face's Llama (``q_proj`` … ``o_proj``, ``gate_proj``, ``up_proj``,
``down_proj``), so the viewer's tensor-parallel roles read them as a user's model would.

    python -m snippets view snippets.viewer.llama_block:llama_block \\
        --example snippets.viewer.llama_block:inputs
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F


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


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """RoPE on (B, H, N, hd): pairs (x1, x2) of the two halves turn by angle θ_i·n."""
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


def llama_block() -> LlamaBlock:
    """The factory ``python -m snippets view`` calls."""
    torch.manual_seed(0)
    return LlamaBlock(LlamaConfig())


def inputs() -> tuple[torch.Tensor]:
    """An example input: one sequence of N positions, width d."""
    cfg = LlamaConfig()
    return (torch.randn(1, cfg.seq_len, cfg.n_embd),)
