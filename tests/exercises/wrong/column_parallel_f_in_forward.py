"""Wrong: an f that all-reduces in forward and passes the gradient through: g's
behaviour where f's is asked."""

import torch
import torch.distributed as dist
import torch.nn.functional as F


class Copy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, group):
        x = x.clone()
        dist.all_reduce(x, group=group)
        return x

    @staticmethod
    def backward(ctx, grad):
        return grad, None


def column_parallel(x, linear, group=None):
    t, r = dist.get_world_size(group), dist.get_rank(group)
    n = linear.out_features // t
    rows = slice(r * n, (r + 1) * n)
    return F.linear(Copy.apply(x, group), linear.weight[rows], linear.bias[rows])
