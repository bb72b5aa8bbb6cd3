"""Wrong: the built-in all_reduce of every piece, then this rank's: right values, but
the exercise builds it from send and recv."""

import torch
import torch.distributed as dist
from torch.distributed import ReduceOp


def reduce_scatter(output, input_list, op=ReduceOp.SUM, group=None):
    total = torch.stack(input_list)
    dist.all_reduce(total, op=op, group=group)
    output.copy_(total[dist.get_rank()])
