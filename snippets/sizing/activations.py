"""Activation bytes per GPU: Korthikanti et al. 2022 (arXiv:2205.05198), generalised.

Their Table 2, per layer, 16-bit activations and 1-byte dropout masks (s sequence,
b micro-batch, h width, a heads, t tensor-parallel ranks):

    no parallelism            sbh(34 + 5as/h)
    TP                        sbh(10 + 24/t + 5as/(ht))
    TP + SP                   sbh(34/t + 5as/(ht))
    TP + selective recompute  sbh(10 + 24/t)
    TP + SP + selective       sbh(34/t)
    full recompute            2sbh (the layer's input only)

Written per token with e bytes a value: the replicated part R (two norm inputs, the
inputs of attention and MLP: 4eh; two dropout masks: 2h), the part TP splits S (q, k,
v, the output projection's input: e(2h + 2h_kv); GELU MLP 2e·ffn, SwiGLU 3e·ffn) and
the score part A·s (softmax e·a, with dropout also its mask a and output e·a). At e =
2, ffn = 4h, h_kv = h: R = 10h, S = 24h, A = 5a. SP splits R too. Selective recompute
and FlashAttention both drop A (flash keeps a row's log-sum-exp, 4 bytes a head a
token, not counted). llama has no dropout. Under CP a GPU holds s/cp tokens whose
queries meet all s keys. Full recompute also holds one layer's working set while it
recomputes (which Korthikanti's 2sbh leaves out).

Pipeline (1F1B): the first stage holds L/p layers for min(m, p) micro-batches, times
1 + (p - 1)/(p·v) with v interleaved chunks (Korthikanti §4.2.3; Megatron-LM's
``theoretical_memory_usage.py``). The embedding's dropout mask (h a token) is on it
too. With p = 1 the same GPU also holds the head: 2eh (final-norm and head inputs) +
4V/t (fp32 logits) a token (Korthikanti §4.3: 4sbh(1 + V/h) at e = 2).
"""

from __future__ import annotations


# --8<-- [start:layer]
def layer_terms(
    arch: str, h: int, a: int, kv: int, ffn: int, e: float
) -> tuple[float, float, float]:
    """(R, S, A): bytes a token of one layer, replicated / TP-split / × keys."""
    dropout = arch == "gpt"  # GPT trains with dropout masks; Llama has none
    h_kv = kv * (h // a)
    R = 4 * e * h + 2 * h * dropout
    mlp = (2 if arch == "gpt" else 3) * e * ffn
    S = e * (2 * h + 2 * h_kv) + mlp
    A = e * a + (a + e * a) * dropout
    return R, S, A


def layer_bytes(
    arch, s, s_kv, b, h, a, kv, ffn, e, t=1, sp=False, recompute="none", flash=True
) -> float:
    """One layer, one micro-batch, on one GPU holding s tokens (s_kv keys)."""
    if recompute == "full":
        return s * b * e * h / (t if sp else 1)  # the layer's input
    R, S, A = layer_terms(arch, h, a, kv, ffn, e)
    keep_scores = not flash and recompute == "none"
    return s * b * (R / (t if sp else 1) + S / t + (A * s_kv / t if keep_scores else 0))


# --8<-- [end:layer]


# --8<-- [start:stage]
def in_flight(m: int, p: int, v: int = 1) -> float:
    """Micro-batches' worth of activations the first 1F1B stage holds."""
    return min(m, p) * (1 + (p - 1) / (p * v) if v > 1 else 1)


def embedding_bytes(arch: str, s: int, b: int, h: int, t=1, sp=False) -> float:
    """The 1-byte dropout mask after the embedding (gpt only)."""
    return s * b * h / (t if sp else 1) if arch == "gpt" else 0.0


def head_bytes(s: int, b: int, h: int, V: int, e: float, t=1, sp=False) -> float:
    """Final norm and head inputs, and the fp32 logits the loss keeps."""
    return s * b * (2 * e * h / (t if sp else 1) + 4 * V / t)


def activation_bytes(
    arch, s, b, L, h, a, kv, ffn, V, e, t=1, sp=False, p=1, v=1, m=1, cp=1, **kw
) -> float:
    """The first pipeline stage's activations: the most loaded GPU. ``kw``:
    ``recompute`` and ``flash`` as for :func:`layer_bytes`."""
    s_loc = s / cp
    one = layer_bytes(arch, s_loc, s, b, h, a, kv, ffn, e, t, sp, **kw)
    total = in_flight(m, p, v) * (
        L / p * one + embedding_bytes(arch, s_loc, b, h, t, sp)
    )
    if p == 1:
        total += head_bytes(s_loc, b, h, V, e, t, sp)
    if kw.get("recompute") == "full":  # recomputing one layer needs its whole set
        flash = kw.get("flash", True)
        total += layer_bytes(arch, s_loc, s, b, h, a, kv, ffn, e, t, sp, "none", flash)
    return total


def mean_ffn(L: int, moe_layers: int, ffn: int, active_ffn: float) -> float:
    """The MLP width a layer's activations see, averaged over the L layers: an MoE
    layer keeps its k routed and its shared experts' activations for each token, as
    a dense MLP of width (k + shared)·expert_ffn would. Left out: the router's logits
    and the k copies of each token's input the dispatch makes."""
    return ((L - moe_layers) * ffn + moe_layers * active_ffn) / L


# --8<-- [end:stage]
