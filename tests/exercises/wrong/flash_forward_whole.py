"""Wrong: right answer, but it builds the whole N x M score matrix at once."""

import math

import torch


def flash_forward(q, k, v, causal=False, scale=None, block_q=256, block_k=512):
    scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    S = (q * scale) @ k.transpose(-1, -2)
    if causal:
        N, M = S.shape[-2:]
        S = S.masked_fill(torch.ones(N, M, dtype=torch.bool).triu(1), float("-inf"))
    L = torch.logsumexp(S, -1)
    return torch.exp(S - L[..., None]) @ v, L
