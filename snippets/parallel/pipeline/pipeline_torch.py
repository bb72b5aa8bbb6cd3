"""The built-in oracle for our pipeline executor: torch.distributed.pipelining run on
the same stages, micro-batches and loss as ``pipeline_executor.execute``.

Stage s of p·v is the same ``layer_split.run_stage`` our executor runs, wrapped in a
``PipelineStage``; rank r holds stages c·p + r for c < v, as torch's interleaved
schedules expect. The loss of micro-batch j is Σ cross-entropy / (B·N), and
``scale_grads=False``, so the m losses and their gradients add up to the mean over
the whole batch, as ours do. torch's pipelining knows nothing of weights shared by
two stages, so the tied embedding's two parts are summed by hand afterwards
(``tied_gradient_sum``), as a user of torch must.

All four of our plans have a torch counterpart that runs on gloo in torch 2.13:

    ======================  ==============================================
    ours                    torch.distributed.pipelining
    ======================  ==============================================
    gpipe                   ScheduleGPipe
    1f1b                    Schedule1F1B (needs m >= p)
    interleaved (v chunks)  ScheduleInterleaved1F1B
    zb-h1                   ScheduleInterleavedZeroBubble, one stage a rank
    ======================  ==============================================

torch's zero-bubble order is its own, not ZB-H1's; the sums it computes are the same.
torch shapes its receive buffers once, from the first micro-batch, so m must divide
the batch's rows; ours takes uneven micro-batches too.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.pipelining import (
    PipelineStage,
    Schedule1F1B,
    ScheduleGPipe,
    ScheduleInterleaved1F1B,
    ScheduleInterleavedZeroBubble,
)

from snippets.core.errors import UsageError
from snippets.models.tiny_gpt import GPT
from snippets.parallel.layer_split import run_stage
from snippets.parallel.pipeline.pipeline_executor import check_sizes, tied_gradient_sum
from snippets.parallel.pipeline.pipeline_schedules import check_arguments

TORCH_SCHEDULES = {
    "gpipe": ScheduleGPipe,
    "1f1b": Schedule1F1B,
    "interleaved": ScheduleInterleaved1F1B,
    "zb-h1": ScheduleInterleavedZeroBubble,
}


class Stage(nn.Module):
    """Stage s of S of the tiny GPT, as a module torch's PipelineStage can hold."""

    def __init__(self, model: GPT, s: int, S: int):
        super().__init__()
        self.model, self.s, self.S = model, s, S

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return run_stage(self.model, self.s, self.S, x)


# --8<-- [start:torch_schedule]
def torch_schedule(
    model: GPT, name: str, m: int, batch: tuple, v: int = 1, group=None
) -> object:
    """torch's schedule for our plan `name`, over this rank's v stages of `model`.
    `batch`: (B, N), the whole batch's shape; each loss is divided by B·N."""
    rows, numel = batch[0], batch[0] * batch[1]
    pp_rank, p = dist.get_rank(group), dist.get_world_size(group)
    check_arguments(name, p, m, v)
    if name == "1f1b" and m < p:  # torch asks for it; ours runs with fewer
        raise UsageError(f"torch's Schedule1F1B needs m >= p={p}, got m={m}")
    if rows % m:  # its buffers are shaped once, by the first micro-batch
        raise UsageError(
            f"torch's schedules need equal micro-batches: m={m} must "
            f"divide the {rows} rows"
        )
    dev, S = model.tok_emb.weight.device, p * v
    stages = [
        PipelineStage(Stage(model, c * p + pp_rank, S), c * p + pp_rank, S, dev,
                      group=group)
        for c in range(v)
    ]  # fmt: skip

    def loss_fn(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        ce = F.cross_entropy(logits.flatten(0, 1), targets.flatten(), reduction="sum")
        return ce / numel

    multi = name in ("interleaved", "zb-h1")  # these take a list of stages
    return TORCH_SCHEDULES[name](
        stages if multi else stages[0], m, loss_fn=loss_fn, scale_grads=False
    )


def torch_step(sched, model: GPT, idx, targets, group=None) -> torch.Tensor | None:
    """One forward and backward of the whole batch; Σ of the m losses on the rank
    of the last stage, None elsewhere. Then the tied embedding's parts summed."""
    pp_rank, p = dist.get_rank(group), dist.get_world_size(group)
    losses: list[torch.Tensor] = []
    first, last = pp_rank == 0, pp_rank == p - 1  # stage 0 and stage S - 1
    args = (idx,) if first else ()
    sched.step(*args, target=targets if last else None, losses=losses)
    tied_gradient_sum(model, p, pp_rank, group)
    return torch.stack(losses).sum() if last else None


# --8<-- [end:torch_schedule]


def run_torch(model: GPT, name: str, idx, targets, m: int, v: int = 1, group=None):
    """``execute``'s arguments, torch's schedule: the loss (last stage) or None."""
    p = dist.get_world_size(group)
    check_sizes(model, p, m, v, idx.shape[0])
    sched = torch_schedule(model, name, m, tuple(targets.shape), v, group)
    return torch_step(sched, model, idx, targets, group)
