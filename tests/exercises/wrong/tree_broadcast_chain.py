"""Wrong: a chain, each rank passing the data to the next: right values, p-1 deep."""

import torch.distributed as dist


def broadcast(tensor, src, group=None):
    r, p = dist.get_rank(), dist.get_world_size()
    if r != src:
        dist.recv(tensor, (r - 1) % p, group=group)
    if (r + 1) % p != src:
        dist.send(tensor, (r + 1) % p, group=group)
