"""Wrong: every rank adds the bias before the sum, so it is added t times."""

import torch
import torch.distributed as dist
import torch.nn.functional as F


class Reduce(torch.autograd.Function):
    @staticmethod
    def forward(ctx, y, group):
        y = y.clone()
        dist.all_reduce(y, group=group)
        return y

    @staticmethod
    def backward(ctx, grad):
        return grad, None


def row_parallel(x, linear, group=None):
    t, r = dist.get_world_size(group), dist.get_rank(group)
    k = linear.in_features // t
    weight = linear.weight[:, r * k : (r + 1) * k]
    return Reduce.apply(F.linear(x, weight, linear.bias), group)
