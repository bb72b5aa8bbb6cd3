"""Wrong: a ring that passes every piece on but never copies its own into place."""

import torch.distributed as dist


def all_gather(tensor_list, tensor, group=None):
    r, p = dist.get_rank(), dist.get_world_size()
    for k in range(p - 1):
        out = tensor if k == 0 else tensor_list[(r - k) % p]
        send = dist.isend(out.contiguous(), (r + 1) % p, group=group)
        dist.irecv(tensor_list[(r - k - 1) % p], (r - 1) % p, group=group).wait()
        send.wait()
