"""Wrong: the older sum d_a is kept at its own max, only d_b is shifted."""

import torch

from snippets.attention.online_softmax import SoftmaxState


def merge(a, b):
    m = torch.maximum(a.m, b.m)
    shift = torch.where(torch.isneginf(m), torch.zeros_like(m), m)
    return SoftmaxState(m, a.d + b.d * torch.exp(b.m - shift))
