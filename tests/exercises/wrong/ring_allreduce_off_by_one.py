"""Wrong: at step t it sends chunk (rank - t + 1) instead of (rank - t)."""

import torch
import torch.distributed as dist
from torch.distributed import ReduceOp


def ring_allreduce(tensor, op=ReduceOp.SUM, group=None):
    rank, p = dist.get_rank(), dist.get_world_size()
    flat = tensor.view(-1)
    chunks = list(torch.tensor_split(flat, p))
    right, left = (rank + 1) % p, (rank - 1) % p
    for t in range(2 * (p - 1)):
        out, into = chunks[(rank - t + 1) % p], chunks[(rank - t - 1) % p]
        incoming = torch.empty_like(into)
        send = dist.isend(out.clone(), right)
        dist.irecv(incoming, left).wait()
        send.wait()
        if t < p - 1:
            into.copy_(
                torch.maximum(into, incoming) if op == ReduceOp.MAX else into + incoming
            )
        else:
            into.copy_(incoming)
