"""Parameter counts from a model's dimensions, whole and per GPU under TP and PP.

Two shapes. ``gpt``: learned token and position embeddings, LayerNorm (weight and bias),
attention q, k, v, o and a GELU MLP h→ffn→h, biases everywhere, the head tied to
the token embedding (GPT-2, GPT-3, the tiny GPT). ``llama``: token embedding only
(RoPE has no parameters), RMSNorm (weight only), grouped-query attention with
``kv_heads`` key/value heads of ``h/heads`` each, a SwiGLU MLP (gate, up, down), no
biases, an untied head. One layer of GPT is 12h² + 13h with biases: Narayanan et al.
2021 (arXiv:2104.04473) eq. 2, P = 12Lh²(1 + 13/(12h) + (V+s)/(12Lh)), which leaves
out the final LayerNorm's 2h.

Under tensor parallelism (Megatron's split) every weight matrix is cut t ways, so are
the biases of the column-split layers (q, k, v, the MLP's first); the row-split
layers' biases (o, the MLP's last) and the norms are replicated. The token embedding
and the head are split by vocabulary; positions are replicated.
"""

from __future__ import annotations


# --8<-- [start:params]
def norm_params(arch: str, h: int, bias: bool) -> int:
    """One LayerNorm (gpt: weight, and bias if any) or RMSNorm (llama: weight)."""
    return h * (2 if arch == "gpt" and bias else 1)


def attention_params(h: int, a: int, kv: int, bias: bool) -> tuple[int, int]:
    """(split by TP, replicated): q, k, v, o for a query heads, kv key/value heads."""
    d = h // a  # head dim
    weights = h * a * d + 2 * h * kv * d + a * d * h
    return weights + bias * (a * d + 2 * kv * d), bias * h  # o's bias replicated


def mlp_params(arch: str, h: int, ffn: int, bias: bool) -> tuple[int, int]:
    """(split, replicated): GELU h→ffn→h, or SwiGLU: gate, up h→ffn; down."""
    ins = 1 if arch == "gpt" else 2  # column-split input matrices
    return (ins + 1) * h * ffn + bias * ins * ffn, bias * h


def layer_params(
    arch: str, h: int, a: int, kv: int, ffn: int, bias: bool, t: int = 1
) -> float:
    """One transformer layer's parameters on one of t tensor-parallel ranks."""
    attn_split, attn_rep = attention_params(h, a, kv, bias)
    mlp_split, mlp_rep = mlp_params(arch, h, ffn, bias)
    replicated = 2 * norm_params(arch, h, bias) + attn_rep + mlp_rep
    return (attn_split + mlp_split) / t + replicated


def embedding_params(arch: str, V: int, s: int, h: int, t: int = 1) -> float:
    """Input embeddings on one TP rank: tokens split by vocabulary, gpt positions."""
    return V * h / t + (s * h if arch == "gpt" else 0)


def head_params(V: int, h: int, tied: bool, t: int = 1) -> float:
    """The output projection's own parameters (none when tied to the embedding)."""
    return 0 if tied else V * h / t


def total_params(
    arch: str, V: int, s: int, L: int, h: int, a: int, kv: int, ffn: int, tied, bias
) -> int:
    """Every parameter of the model, counted once."""
    layer = layer_params(arch, h, a, kv, ffn, bias)
    head = head_params(V, h, tied)
    body = L * layer + norm_params(arch, h, bias) + head
    return round(embedding_params(arch, V, s, h) + body)


# --8<-- [end:params]


def count(model: dict) -> int:
    """:func:`total_params` of a dict shaped like a ``presets.MODELS`` entry."""
    keys = ("arch", "vocab", "seq", "layers", "hidden", "heads", "kv_heads", "ffn")
    return total_params(*(model[k] for k in keys), model["tied"], model["bias"])


# --8<-- [start:per_gpu]
def params_per_gpu(
    arch, V, s, L, h, a, kv, ffn, tied, bias, t: int = 1, p: int = 1
) -> float:
    """Parameters on the most loaded GPU of a t × p (TP × PP) grid. The first stage
    holds the embeddings and L/p layers, the last L/p layers, the final norm and the
    head; with a tied head and p > 1 the last stage keeps its own copy of the token
    embedding (as Megatron does) and the two copies' gradients are summed."""
    layers = L / p * layer_params(arch, h, a, kv, ffn, bias, t)
    emb = embedding_params(arch, V, s, h, t)
    last_head = V * h / t if (not tied or p > 1) else 0
    last = layers + norm_params(arch, h, bias) + last_head
    if p == 1:
        return emb + last
    return max(emb + layers, last)


def flop_params(arch: str, V: int, s: int, h: int, tied: bool, total: int) -> int:
    """N of 6N: every parameter but the input embeddings, which are looked up, not
    multiplied (torchtitan excludes them the same way); a tied head is a matmul."""
    return total - (0 if tied else V * h) - (s * h if arch == "gpt" else 0)


# --8<-- [end:per_gpu]
