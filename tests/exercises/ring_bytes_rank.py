"""What rank 0 sends in a real all-reduce of 1 MiB: the messages its trace records."""

from __future__ import annotations

import torch
import torch.distributed as dist

from snippets.comm.algorithms.naive_allreduce import naive_allreduce
from snippets.comm.algorithms.ring_allreduce import ring_allreduce


def bytes_sent_and_received() -> dict:
    trace: list = []
    x = torch.ones(2**20 // 4)  # 1 MiB of fp32
    ring_allreduce(x, trace=trace)
    ring = sum(s.nbytes for s in trace if s.src == 0)
    trace = []
    naive_allreduce(x, variant="root", trace=trace)
    to_root = sum(s.nbytes for s in trace if s.dst == 0)  # this rank's sends to 0
    return {"rank": dist.get_rank(), "ring_sent": ring, "naive_to_root": to_root}
