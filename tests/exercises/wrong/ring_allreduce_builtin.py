"""Wrong: the built-in collective, where the exercise builds it from send and recv."""

import torch.distributed as dist
from torch.distributed import ReduceOp


def ring_allreduce(tensor, op=ReduceOp.SUM, group=None):
    dist.all_reduce(tensor, op, group=group)
