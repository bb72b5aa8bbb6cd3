"""Wrong: the loss divided by k·p, on top of DDP's own average over the ranks."""

import contextlib

import torch.distributed as dist


def accumulate(model, micro_batches):
    k, p = len(micro_batches), dist.get_world_size()
    for j, (idx, targets) in enumerate(micro_batches):
        with contextlib.nullcontext() if j == k - 1 else model.no_sync():
            (model(idx, targets)[1] / (k * p)).backward()
