"""Wrong: the right block of the weight, no f: x's gradient is never summed."""

import torch.distributed as dist
import torch.nn.functional as F


def column_parallel(x, linear, group=None):
    t, r = dist.get_world_size(group), dist.get_rank(group)
    n = linear.out_features // t
    rows = slice(r * n, (r + 1) * n)
    return F.linear(x, linear.weight[rows], linear.bias[rows])
