"""Wrong: the right numbers, but every rank steps every parameter and keeps the
momentum of all of them: plain data parallelism, no sharded optimizer state."""

import torch
import torch.distributed as dist


def zero1_step(params, state, lr, momentum, group=None):
    for t in params:
        dist.all_reduce(t.grad, group=group)
        t.grad.div_(dist.get_world_size(group))
    if "optimizer" not in state:
        state["optimizer"] = torch.optim.SGD(params, lr=lr, momentum=momentum)
    state["optimizer"].step()
