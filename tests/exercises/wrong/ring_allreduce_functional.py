"""Wrong: torch's functional all-reduce, where the exercise builds it from send and
recv."""

import torch.distributed._functional_collectives as funcol
from torch.distributed import ReduceOp


def ring_allreduce(tensor, op=ReduceOp.SUM, group=None):
    reduce = {ReduceOp.SUM: "sum", ReduceOp.MAX: "max"}[op]
    tensor.copy_(funcol.all_reduce(tensor, reduce, group or list(range(4))))
