"""Wrong: right values, but it waits for the transfer before it returns, so nothing
can overlap with it."""

import torch
import torch.distributed as dist


def start_pass(t, group, tag):
    r, p = dist.get_rank(group), dist.get_world_size(group)
    incoming = torch.empty_like(t, memory_format=torch.contiguous_format)
    works = [
        dist.isend(t.contiguous(), (r + 1) % p, group=group, tag=tag),
        dist.irecv(incoming, (r - 1) % p, group=group, tag=tag),
    ]
    for w in works:
        w.wait()
    return works, incoming
