"""Wrong: it goes round the whole world, whatever group it is given."""

import torch
import torch.distributed as dist


def start_pass(t, group, tag):
    r, p = dist.get_rank(), dist.get_world_size()
    incoming = torch.empty_like(t, memory_format=torch.contiguous_format)
    works = [dist.isend(t.contiguous(), (r + 1) % p), dist.irecv(incoming, (r - 1) % p)]
    return works, incoming
