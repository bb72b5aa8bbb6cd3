"""FLOPs per token, and MFU and HFU as PaLM defines them (Chowdhery et al. 2022,
arXiv:2204.02311, Appendix B).

A matmul with N weights costs 2N FLOPs a token forward and 4N backward (input and
weight gradients): 6N. Attention's two matmuls (q·kᵀ and scores·v) are not weights:
4·s·(H·Q) a token a layer forward, three times that with backward, so PaLM's
6N + 12·L·H·Q·T with T = s, H heads of width Q. N leaves out the input embeddings
(:func:`snippets.sizing.params.flop_params`).

Causal halving: a causal mask makes half the scores zero. Megatron-LM's
``num_floating_point_operations`` halves the attention term ("/ 2 # causal mask");
torchtitan and PaLM do not ("we follow the convention and do not account for
sparsity in causal attention"). ``causal_halving=False`` is the default here, so MFU
compares with PaLM's and torchtitan's.

MFU counts the model's FLOPs only; HFU also what recompute adds (PaLM): selective
recompute redoes attention's forward matmuls (4LHQT), full recompute every layer's
forward (2N_layers + 4LHQT; the head is not recomputed). FlashAttention's own
recompute of q·kᵀ in its backward is counted in neither.
"""

from __future__ import annotations


# --8<-- [start:flops]
def attention_flops(L: int, h_q: int, s: int, causal_halving: bool = False) -> float:
    """12·L·H·Q·T a token, fwd + bwd; h_q = H·Q (heads × head width)."""
    return 12 * L * h_q * s / (2 if causal_halving else 1)


def model_flops_per_token(
    N: float, L: int, h_q: int, s: int, causal_halving: bool = False
) -> float:
    """6N + 12LHQT: the numerator of MFU."""
    return 6 * N + attention_flops(L, h_q, s, causal_halving)


def recompute_flops(
    recompute: str, layer_params: float, L: int, h_q: int, s: int, causal_halving=False
) -> float:
    """FLOPs a token that recompute adds: attention's forward (selective), or every
    layer's forward (full)."""
    attn_forward = attention_flops(L, h_q, s, causal_halving) / 3
    if recompute == "selective":
        return attn_forward
    if recompute == "full":
        return 2 * L * layer_params + attn_forward
    return 0.0


def utilization(
    flops_per_token: float, tokens_per_s: float, gpus: int, peak: float
) -> float:
    """PaLM's MFU (model FLOPs) or HFU (hardware FLOPs): achieved ÷ peak."""
    return flops_per_token * tokens_per_s / (gpus * peak)


# --8<-- [end:flops]
