"""Wrong: a correct ring whose last line divides by p, as ReduceOp.AVG would."""

import torch
import torch.distributed as dist
from torch.distributed import ReduceOp


def reduce_scatter(output, input_list, op=ReduceOp.SUM, group=None):
    r, p = dist.get_rank(), dist.get_world_size()
    partial = input_list[(r - 1) % p].clone()
    incoming = torch.empty_like(output)
    for k in range(p - 1):
        send = dist.isend(partial, (r + 1) % p, group=group)
        dist.irecv(incoming, (r - 1) % p, group=group).wait()
        send.wait()
        mine = input_list[(r - k - 2) % p]
        incoming = (
            torch.maximum(incoming, mine) if op == ReduceOp.MAX else incoming + mine
        )
        partial, incoming = incoming, torch.empty_like(output)
    output.copy_(partial)
    if op == ReduceOp.SUM:
        output /= p
