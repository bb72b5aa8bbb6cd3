"""Wrong: it gathers every rank's K and V with the built-in all_gather."""

import torch
import torch.distributed as dist

from snippets.attention.flash_algorithms import flash_forward
from snippets.attention.zigzag_layout import zigzag_unshard


def ring_forward(q, k, v, causal, group):
    p = dist.get_world_size(group)
    parts = [torch.empty_like(k) for _ in range(p)]
    dist.all_gather(parts, k, group=group)
    return flash_forward(q, zigzag_unshard(parts), zigzag_unshard(parts), causal)
