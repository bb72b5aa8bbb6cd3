"""Wrong: the right means, but one all-reduce per gradient instead of per bucket."""

import torch.distributed as dist


def average_bucket(params, group=None):
    for t in params:
        dist.all_reduce(t.grad, group=group)
        t.grad.div_(dist.get_world_size(group))
