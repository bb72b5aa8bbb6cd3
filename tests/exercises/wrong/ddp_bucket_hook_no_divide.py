"""Wrong: the bucket is summed over the ranks and never divided by p."""

import torch
import torch.distributed as dist


def average_bucket(params, group=None):
    flat = torch.cat([t.grad.flatten() for t in params])
    dist.all_reduce(flat, group=group)
    offset = 0
    for t in params:
        t.grad.copy_(flat[offset : offset + t.numel()].view_as(t.grad))
        offset += t.numel()
