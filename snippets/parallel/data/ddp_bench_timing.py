"""Our DDP against torch's ``DistributedDataParallel``, and our ZeRO-3 against torch's
FSDP2 (``fully_shard``), timed step by step in the same run on the same tiny GPT.

A step is forward, backward, SGD step and ``zero_grad`` on this rank's rows. Each pair
(ours, torch's) starts from the same weights (seed 0) and sees the same batches. After
``warmup`` untimed steps each, a repeat times ``steps`` steps of each, taking turns (A
B A B ..., who goes first alternating), so a machine that gets busier slows both
alike. A step's time is the slowest rank's (a barrier before, a MAX after:
``measure.time_it``). Per repeat and side, the median step; per pair, the median of
those and their range, and ``ratio`` = ours ÷ torch's, with the lowest and highest
per-repeat ratio as its spread. ``cpu_s``: the CPU time of the rank's main thread per
step (forward, autograd, hooks; not gloo's threads), ``cpu_ratio`` ours ÷ torch's,
less noisy than wall time where ranks share cores. For our DDP also the share of
all-reduce time hidden inside backward (``ddp_timeline.hidden_fraction``). Both are
per step the mean over the ranks, then the median over the timed steps.
Both pairs train, so their weights must still agree afterwards: ``max_abs_diff``.
``snippets.parallel.data.ddp_bench`` prints it, as a snippet and as a bench.
"""

from __future__ import annotations

import statistics
import time

import torch
import torch.distributed as dist
from torch.distributed.fsdp import fully_shard
from torch.nn.parallel import DistributedDataParallel as TorchDDP

from snippets.core.measure import time_it
from snippets.core.runtime import device
from snippets.models.tiny_gpt import GPT, GPTConfig
from snippets.parallel.data.ddp import DDP, global_batches
from snippets.parallel.data.ddp_timeline import hidden_fraction, spans
from snippets.parallel.sharded import zero

CFG = GPTConfig(vocab_size=256, block_size=64, n_layer=4, n_head=4, n_embd=128)
ROWS = 4  # sequences per rank per step
PAIRS = {"ddp": "torch_ddp", "zero3": "fsdp2"}  # ours → its torch counterpart
LR = 0.1


class Stepper:
    """One implementation's model, optimizer and batches; ``()`` runs one step."""

    def __init__(self, model, optimizer, batches: list, ddp: DDP | None = None):
        self.model, self.optimizer, self.batches = model, optimizer, batches
        self.ddp, self.count, self.cpu, self.stamps = ddp, 0, [], []

    def __call__(self) -> None:
        cpu = time.thread_time()  # this thread's: forward, autograd, hooks, launches
        idx, targets = self.batches[self.count % len(self.batches)]
        self.count += 1
        _, loss = self.model(idx, targets)
        t0 = time.perf_counter_ns()
        loss.backward()
        self.optimizer.step()
        self.optimizer.zero_grad()
        self.cpu.append(time.thread_time() - cpu)
        if self.ddp is not None:  # a fresh list every backward: kept, not copied
            self.stamps.append((self.ddp.timeline, t0))

    def hidden(self) -> list[float]:
        """Per step, the share of our all-reduce time inside backward."""
        return [hidden_fraction(spans(stamps, t0)) for stamps, t0 in self.stamps]

    def state(self) -> dict[str, torch.Tensor]:
        """The full parameters, gathered if sharded; CPU copies."""
        if isinstance(self.optimizer, zero.ZeroOptimizer):
            found = zero.full_state_dict(self.model)
        else:
            found = self.model.state_dict()
        found = {k.removeprefix("module."): v for k, v in found.items()}
        full = [
            (k, getattr(v, "full_tensor", lambda v=v: v)()) for k, v in found.items()
        ]
        return {k: v.detach().cpu().clone() for k, v in full}


def steppers(pair: str, cfg: GPTConfig, batches: list, bucket_cap_mb: float):
    """(ours, torch's) for ``pair``, same weights, same batches."""
    dev = device()
    sgd = torch.optim.SGD
    if pair == "ddp":
        mine = DDP(GPT(cfg, seed=0).to(dev), bucket_cap_mb=bucket_cap_mb)
        theirs = TorchDDP(GPT(cfg, seed=0).to(dev), bucket_cap_mb=bucket_cap_mb)
        return (
            Stepper(mine, sgd(mine.parameters(), lr=LR), batches, ddp=mine),
            Stepper(theirs, sgd(theirs.parameters(), lr=LR), batches),
        )
    module, optimizer = zero.shard(GPT(cfg, seed=0).to(dev), sgd, 3, lr=LR)
    fsdp = GPT(cfg, seed=0).to(dev)
    for block in fsdp.blocks:  # one unit per block and one for the rest, as ours
        fully_shard(block)
    fully_shard(fsdp)
    return (
        Stepper(module, optimizer, batches),
        Stepper(fsdp, sgd(fsdp.parameters(), lr=LR), batches),
    )


# --8<-- [start:interleave]
def interleaved(ours, theirs, steps: int, repeats: int) -> tuple[list, list]:
    """Per repeat, ``steps`` step times of each, taking turns; the slowest rank's."""
    dev, times = device(), ([], [])
    for r in range(repeats):
        rep = ([], [])
        for s in range(steps):
            for j in (0, 1) if (r + s) % 2 == 0 else (1, 0):
                fn = (ours, theirs)[j]
                rep[j].append(time_it(fn, warmup=0, iters=1, device=dev))
        times[0].append(rep[0]), times[1].append(rep[1])
    return times


def record(pair: str, times: tuple[list, list], p: int) -> dict:
    """Per side, the median step time of each repeat; over the repeats, their median
    and their range. ``ratio`` = ours ÷ torch's median lies within the range of the
    per-repeat ratios: if ours ≥ L·torch's in every repeat, so are the medians."""
    (mine, theirs) = ([statistics.median(rep) for rep in side] for side in times)
    m, t = statistics.median(mine), statistics.median(theirs)
    per_repeat = [a / b for a, b in zip(mine, theirs)]
    return {
        "impl": pair,
        "baseline": PAIRS[pair],
        "world_size": p,
        "step_time_s": m,
        "step_time_min_s": min(mine),
        "step_time_max_s": max(mine),
        "torch_step_time_s": t,
        "torch_step_time_min_s": min(theirs),
        "torch_step_time_max_s": max(theirs),
        "ratio": m / t,
        "ratio_min": min(per_repeat),
        "ratio_max": max(per_repeat),
        "steps": sum(map(len, times[0])),  # timed, per side
        "repeats": len(mine),
    }


# --8<-- [end:interleave]


def rank_mean_median(values: list[float]) -> float | None:
    """Per timed step the mean over the ranks, then the median over the steps."""
    if not values:
        return None
    found = torch.tensor(values, dtype=torch.float64, device=device())
    dist.all_reduce(found)
    return statistics.median((found / dist.get_world_size()).tolist())


def measure(
    steps: int = 5,
    repeats: int = 5,
    bucket_cap_mb: float = 25.0,
    pairs: tuple[str, ...] = tuple(PAIRS),
    cfg: GPTConfig = CFG,
    rows: int = ROWS,
    warmup: int = 2,
) -> dict:
    """On every rank: one record per pair, plus each side's final weights."""
    p, rank, dev = dist.get_world_size(), dist.get_rank(), device()
    data = global_batches(cfg, 4, B=rows * p)  # four batches, cycled
    batches = [(i.tensor_split(p)[rank].to(dev), t.tensor_split(p)[rank].to(dev))
               for i, t in data]  # fmt: skip
    records, states = [], {}
    for pair in pairs:
        ours, theirs = steppers(pair, cfg, batches, bucket_cap_mb)
        for _ in range(warmup):  # connections, FSDP's lazy init, torch's rebuckets
            ours(), theirs()
        found = record(pair, interleaved(ours, theirs, steps, repeats), p)
        states[pair] = ours.state(), theirs.state()
        a, b = states[pair]
        found["max_abs_diff"] = max((a[k] - b[k]).abs().max().item() for k in b)
        found["cpu_s"], found["torch_cpu_s"] = (
            rank_mean_median(side.cpu[warmup:]) for side in (ours, theirs)
        )
        found["cpu_ratio"] = found["cpu_s"] / found["torch_cpu_s"]
        found["hidden_fraction"] = rank_mean_median(ours.hidden()[warmup:])
        found.update(bucket_cap_mb=bucket_cap_mb, params=cfg.num_params())
        records.append(found)
    return {"records": records, "states": states}
