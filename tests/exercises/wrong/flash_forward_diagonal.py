"""Wrong: the causal mask hides the diagonal too (k >= q), so query 0 sees nothing."""

import math

import torch


def flash_forward(q, k, v, causal=False, scale=None, block_q=256, block_k=512):
    B, H, N, d = q.shape
    M = k.shape[2]
    scale = 1 / math.sqrt(d) if scale is None else scale
    O = torch.empty(B, H, N, d, dtype=q.dtype)
    L = torch.empty(B, H, N, dtype=q.dtype)
    for i in range(0, N, block_q):
        Qi = q[:, :, i : i + block_q] * scale
        br = Qi.shape[2]
        Oi = torch.zeros_like(Qi)
        li = torch.zeros_like(Qi[..., :1])
        mi = torch.full_like(li, float("-inf"))
        for j in range(0, M, block_k):
            S = Qi @ k[:, :, j : j + block_k].transpose(-1, -2)
            if causal:
                rows = torch.arange(i, i + br)[:, None]
                cols = torch.arange(j, j + S.shape[-1])[None, :]
                S = S.masked_fill(cols >= rows, float("-inf"))
            m_new = torch.maximum(mi, S.amax(-1, keepdim=True))
            P = torch.exp(S - m_new)
            alpha = torch.exp(mi - m_new)
            li = alpha * li + P.sum(-1, keepdim=True)
            Oi = alpha * Oi + P @ v[:, :, j : j + block_k]
            mi = m_new
        O[:, :, i : i + br] = Oi / li
        L[:, :, i : i + br] = (mi + torch.log(li)).squeeze(-1)
    return O, L
