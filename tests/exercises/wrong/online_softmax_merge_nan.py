"""Wrong: right for every row with a finite max, NaN for a row that is all -inf."""

import torch

from snippets.attention.online_softmax import SoftmaxState


def merge(a, b):
    m = torch.maximum(a.m, b.m)
    return SoftmaxState(m, a.d * torch.exp(a.m - m) + b.d * torch.exp(b.m - m))
