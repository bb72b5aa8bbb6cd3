"""Wrong: the root adds up what the others sent but not its own tensor."""

import torch
import torch.distributed as dist
from torch.distributed import ReduceOp


def naive_allreduce(tensor, op=ReduceOp.SUM, group=None):
    r, p = dist.get_rank(), dist.get_world_size()
    if r != 0:
        dist.send(tensor, 0, group=group)
        dist.recv(tensor, 0, group=group)
        return
    others = [torch.empty_like(tensor) for _ in range(1, p)]
    for j, buf in enumerate(others, start=1):
        dist.recv(buf, j, group=group)
    total = others[0].clone()
    for other in others[1:]:
        total = torch.maximum(total, other) if op == ReduceOp.MAX else total + other
    tensor.copy_(total)
    works = [dist.isend(tensor, j, group=group) for j in range(1, p)]
    for w in works:
        w.wait()
