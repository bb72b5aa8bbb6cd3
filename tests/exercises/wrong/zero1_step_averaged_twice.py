"""Wrong: a sharded step with its all-gather, whose gradient is divided by p twice
(an AVG all-reduce, then ÷ p again)."""

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
        dist.all_reduce(grad, op=dist.ReduceOp.AVG, group=group)
        grad = grad[a:b] / p
        buf = state.get(i)
        state[i] = buf = grad.clone() if buf is None else buf.mul_(momentum).add_(grad)
        mine = t.new_zeros(s)
        mine[: b - a] = t.view(-1)[a:b] - lr * buf
        parts = [torch.empty_like(mine) for _ in range(p)]
        dist.all_gather(parts, mine, group=group)
        t.view(-1).copy_(torch.cat(parts)[:n])
