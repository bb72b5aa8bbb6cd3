"""Wrong: each rank steps its own shard of each parameter and never all-gathers, so
the rest of every parameter keeps its old values."""

import torch
import torch.distributed as dist


@torch.no_grad()
def zero1_step(params, state, lr, momentum, group=None):
    rank, p = dist.get_rank(group), dist.get_world_size(group)
    for i, t in enumerate(params):
        n = t.numel()
        s = -(-n // p)
        a, b = min(n, rank * s), min(n, rank * s + s)
        grad = t.grad.reshape(-1).clone()
        dist.all_reduce(grad, group=group)
        grad = grad[a:b] / p
        buf = state.get(i)
        state[i] = buf = grad.clone() if buf is None else buf.mul_(momentum).add_(grad)
        t.view(-1)[a:b] -= lr * buf
