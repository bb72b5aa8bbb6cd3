"""Wrong: a g that does not all-reduce in forward: each rank's partial product."""

import torch.distributed as dist
import torch.nn.functional as F


def row_parallel(x, linear, group=None):
    t, r = dist.get_world_size(group), dist.get_rank(group)
    k = linear.in_features // t
    return F.linear(x, linear.weight[:, r * k : (r + 1) * k]) + linear.bias
