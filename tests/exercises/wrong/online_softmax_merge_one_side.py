"""Wrong: the new max is applied to a's sum only; b's is added as it is."""

import torch

from snippets.attention.online_softmax import SoftmaxState


def merge(a, b):
    m = torch.maximum(a.m, b.m)
    shift = torch.where(torch.isneginf(m), torch.zeros_like(m), m)
    return SoftmaxState(m, a.d * torch.exp(a.m - shift) + b.d)
