"""Wrong: the built-in collective, where the exercise builds it from send and recv."""

import torch.distributed as dist


def all_gather(tensor_list, tensor, group=None):
    dist.all_gather(tensor_list, tensor, group=group)
