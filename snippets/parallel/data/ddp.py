"""Data parallelism by hand: a full replica per rank, gradients averaged in buckets
that are all-reduced while the backward pass is still running.

* ``naive_allreduce_grads(module)``: the plain form. After ``backward()`` returns, one
  all-reduce per parameter. Nothing overlaps: the network waits for the whole backward
  pass, then the CPU waits for the network, once per tensor.
* ``DDP(module, group=None, bucket_cap_mb=25.0)``: the parameters are grouped into
  buckets (``ddp_buckets``: reverse order, small first bucket). A
  ``register_post_accumulate_grad_hook`` on each parameter counts the gradients a
  bucket still waits for; when the last one lands, the bucket's gradients are copied
  into one flat tensor and its all-reduce starts (``async_op=True``), while autograd
  goes on with earlier layers. Buckets are launched strictly in bucket order, as torch
  does, so every rank issues the same collectives in the same order. A callback queued
  on autograd's engine runs when backward ends: it waits for every bucket, divides by
  the world size (SUM then divide: gloo's ``ReduceOp.AVG`` has been wrong) and copies
  the means back into ``.grad``.
* ``with ddp.no_sync():`` backward only accumulates ``.grad`` locally; the next
  synced backward averages the accumulated sum. ``accumulate(ddp, micro_batches)``:
  k micro-batches as one step, each loss ÷ k, all but the last under ``no_sync()``.
* ``average_bucket(params, group)``: what one bucket goes through, in one call
  (flatten, SUM all-reduce, ÷ p, copy back); ``DDP`` runs the same pieces in two
  halves, around an asynchronous all-reduce.

Decided and tested: frozen parameters (``requires_grad=False``) get no hook and no
bucket; a tied weight (tiny_gpt's ``tok_emb``/``lm_head``) is one parameter, in one
bucket, reduced once; a parameter that got no gradient raises one clear error (torch
asks for ``find_unused_parameters=True``; here the model must use every parameter).
Like torch, rank 0's parameters are broadcast at construction. Buffers are not synced
(tiny_gpt has none).

    python -m snippets run ddp               # 2 ranks; -n 3, --bucket-cap-mb 0.05
    torchrun --nproc-per-node 2 -m snippets run ddp
"""

from __future__ import annotations

import argparse
import contextlib
import time
from collections.abc import Iterator

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as TorchDDP

from snippets.core.claims import law
from snippets.core.cli import main_entry, positive_float, positive_int
from snippets.core.compare import max_difference
from snippets.core.parts import Excerpt
from snippets.core.runtime import Spec, print0
from snippets.models.tiny_gpt import GPT, GPTConfig, random_batch
from snippets.parallel.data.ddp_buckets import assign_buckets, bucket_bytes

SPEC = Spec(
    timed=True,  # it measures time: run-all runs it alone
    summary="DDP by hand: bucketed all-reduce overlapping backward, vs torch's DDP",
    world_size=2,
)


# --8<-- [start:naive]
def naive_allreduce_grads(module: nn.Module, group=None) -> None:
    """After backward(): every gradient, one by one, summed over the group and divided
    by its size."""
    p = dist.get_world_size(group)
    for param in module.parameters():
        if param.grad is not None:
            dist.all_reduce(param.grad, op=dist.ReduceOp.SUM, group=group)
            param.grad.div_(p)


# --8<-- [end:naive]


# --8<-- [start:bucket]
def flatten_grads(params: list[torch.Tensor]) -> torch.Tensor:
    """One bucket's gradients, copied into one flat tensor: one message, not many."""
    return torch.cat([t.grad.flatten() for t in params])  # (bucket numel,)


def unflatten_mean(flat: torch.Tensor, params: list[torch.Tensor], p: int) -> None:
    """The summed bucket ÷ p (SUM, then divide: gloo's ``ReduceOp.AVG`` has been
    wrong), each slice copied back into its parameter's ``.grad``."""
    flat.div_(p)
    offset = 0
    for t in params:
        t.grad.copy_(flat[offset : offset + t.numel()].view_as(t.grad))
        offset += t.numel()


def average_bucket(params: list[torch.Tensor], group=None) -> None:
    """Each ``.grad`` of one bucket's parameters becomes its mean over ``group``, in
    one all-reduce for the whole bucket; the parameters themselves are not touched.
    ``DDP`` below does the same in two halves: the flatten and an asynchronous
    all-reduce when the bucket's last gradient lands, the rest when backward ends."""
    flat = flatten_grads(params)
    dist.all_reduce(flat, op=dist.ReduceOp.SUM, group=group)
    unflatten_mean(flat, params, dist.get_world_size(group))


# --8<-- [end:bucket]


# --8<-- [start:ddp]
class DDP(nn.Module):
    def __init__(
        self,
        module: nn.Module,
        group: dist.ProcessGroup | None = None,
        bucket_cap_mb: float = 25.0,
    ):
        super().__init__()
        self.module, self.group = module, group
        self.dp_world_size = dist.get_world_size(group)
        # parameters() yields a tied weight once; frozen ones take no part
        self.params = [t for t in module.parameters() if t.requires_grad]
        self.buckets = assign_buckets(self.params, bucket_cap_mb)
        with torch.no_grad():  # every replica starts from rank 0's weights
            for t in module.parameters():
                dist.broadcast(t, dist.get_global_rank(group or dist.group.WORLD, 0))
        self.bucket_of = {i: b for b, bucket in enumerate(self.buckets) for i in bucket}
        self.names = {id(t): n for n, t in module.named_parameters()}
        self.sync = True
        self.timeline: list[dict] = []  # per bucket: ready, start, end (ns)
        self._reset()
        for i, t in enumerate(self.params):
            t.register_post_accumulate_grad_hook(self._hook(i))

    def forward(self, *args, **kwargs):
        return self.module(*args, **kwargs)

    @contextlib.contextmanager
    def no_sync(self) -> Iterator[None]:
        """Backward inside only accumulates .grad; the next synced one averages it."""
        self.sync, before = False, self.sync
        try:
            yield
        finally:
            self.sync = before

    def _reset(self) -> None:
        self.waiting = [len(bucket) for bucket in self.buckets]  # grads not yet ready
        self.works: list[tuple[dist.Work, torch.Tensor]] = []  # in bucket order
        self.fired: set[int] = set()  # parameters whose gradient is ready
        self.queued = False

    def _hook(self, i: int):
        def hook(t: torch.Tensor) -> None:  # runs after t.grad has been accumulated
            if not self.sync:
                return
            if not self.queued:  # the first gradient of this backward pass
                torch.autograd.Variable._execution_engine.queue_callback(self._finish)
                self.queued, self.timeline = True, []
            b = self.bucket_of[i]
            self.fired.add(i)
            self.waiting[b] -= 1
            if self.waiting[b] == 0:
                self.timeline.append({"bucket": b, "ready": time.perf_counter_ns()})
                while len(self.works) < len(self.buckets):  # launch in bucket order
                    if self.waiting[len(self.works)]:
                        break
                    self._launch(len(self.works))

        return hook

    def _launch(self, b: int) -> None:
        flat = flatten_grads([self.params[i] for i in self.buckets[b]])
        event = next(e for e in self.timeline if e["bucket"] == b)
        event["start"] = time.perf_counter_ns()
        work = dist.all_reduce(flat, dist.ReduceOp.SUM, self.group, async_op=True)
        work.get_future().then(lambda _: event.update(end=time.perf_counter_ns()))
        self.works.append((work, flat))

    def _finish(self) -> None:
        """Queued on autograd's engine: runs once, after the whole backward pass."""
        for work, _ in self.works:
            work.wait()
        launched = len(self.works)
        missing = [i for i in range(len(self.params)) if i not in self.fired]
        for b, (_, flat) in enumerate(self.works):
            params = [self.params[i] for i in self.buckets[b]]
            unflatten_mean(flat, params, self.dp_world_size)
        self._reset()
        if launched < len(self.buckets):
            names = [self.names[id(self.params[i])] for i in missing]
            raise RuntimeError(
                f"DDP: no gradient reached {', '.join(names)} in this backward pass; "
                "use every parameter in forward or freeze it (requires_grad=False)"
            )


# --8<-- [end:ddp]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--bucket-cap-mb", type=positive_float, default=0.05)
    parser.add_argument("--steps", type=positive_int, default=3)


# --8<-- [start:accumulate]
def accumulate(model: DDP, micro_batches: list[tuple]) -> None:
    """Backward over k equal micro-batches as one step on all of them: each loss ÷ k
    (the big batch's mean is the mean of the k means), all but the last backward
    under ``no_sync()``, so the summed gradients are averaged over the ranks once."""
    k = len(micro_batches)
    for j, (idx, targets) in enumerate(micro_batches):
        last = j == k - 1
        with contextlib.nullcontext() if last else model.no_sync():
            _, loss = model(idx, targets)
            (loss / k).backward()


# --8<-- [end:accumulate]


# --8<-- [start:train]
def train(model: nn.Module, batches: list[tuple], split: bool = True) -> nn.Module:
    """SGD with momentum, each rank on its 1/p of every batch (or all of it).
    SGD, not Adam: Adam's update ignores the gradient's scale, and would hide a mean
    that is off by a factor of p."""
    p, rank = (dist.get_world_size(), dist.get_rank()) if split else (1, 0)
    opt = torch.optim.SGD(model.parameters(), lr=0.5, momentum=0.9)
    for idx, targets in batches:  # (B, N) each
        _, loss = model(idx.tensor_split(p)[rank], targets.tensor_split(p)[rank])
        loss.backward()  # mean over my B/p rows; DDP makes .grad the mean of means
        opt.step()
        opt.zero_grad()
    return model


# --8<-- [end:train]


def main(bucket_cap_mb: float = 0.05, steps: int = 3) -> dict:
    """Ours, torch's DDP and one process on the whole batch: the same weights."""
    p = dist.get_world_size()
    cfg = GPTConfig(vocab_size=64, block_size=16, n_layer=2, n_head=2, n_embd=32)
    batches = random_batch(cfg, 2 * p, steps=steps)
    ours = DDP(GPT(cfg, seed=0).double(), bucket_cap_mb=bucket_cap_mb)
    train(ours, batches)
    theirs = TorchDDP(GPT(cfg, seed=0).double(), bucket_cap_mb=bucket_cap_mb)
    train(theirs, batches)
    single = train(GPT(cfg, seed=0).double(), batches, split=False)
    vs_torch = max_difference(ours.module, theirs.module)
    vs_single = max_difference(ours.module, single)
    law(vs_torch < 1e-12 and vs_single < 1e-12, (vs_torch, vs_single))
    rows = []
    for b, bucket in enumerate(ours.buckets):
        names = [ours.names[id(ours.params[i])] for i in bucket]
        nbytes = bucket_bytes(ours.params, bucket)
        rows.append({"bucket": b, "tensors": len(bucket), "KiB": nbytes / 1024})
        rows[-1]["from → to"] = f"{names[0]} → {names[-1]}"
    said = Excerpt()  # what the note shows: the run, and both checks
    said(f"{p} ranks, {cfg.num_params():,} fp64 parameters, {steps} SGD steps")
    for r in rows:
        print0(
            f"  bucket {r['bucket']}: {r['tensors']:>2} tensors {r['KiB']:6.1f} KiB"
            f"  {r['from → to']}"
        )
    said(f"max |ours − torch DDP| = {vs_torch:.1e}")
    said(f"max |ours − one process, whole batch| = {vs_single:.1e}")
    return {
        "tables": {"buckets": rows},
        "excerpts": {"summary": said.lines},
        "vs_torch": vs_torch,
        "vs_single": vs_single,
        "provenance": {"backend": dist.get_backend(), "world_size": p},
    }


if __name__ == "__main__":
    raise SystemExit(main_entry(main, SPEC))
