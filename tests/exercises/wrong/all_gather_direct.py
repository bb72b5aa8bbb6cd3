"""Wrong: every rank sends its tensor straight to every other: right values, but not
the ring the exercise asks for."""

import torch.distributed as dist


def all_gather(tensor_list, tensor, group=None):
    r, p = dist.get_rank(), dist.get_world_size()
    works = [dist.isend(tensor, j, group=group) for j in range(p) if j != r]
    works += [dist.irecv(tensor_list[j], j, group=group) for j in range(p) if j != r]
    tensor_list[r].copy_(tensor)
    for w in works:
        w.wait()
