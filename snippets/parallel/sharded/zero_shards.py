"""ZeRO's unit of sharding: one parameter, flattened, padded, cut into N equal chunks.

Rank r owns chunk r of every trainable parameter (as FSDP2 does, one parameter at a
time, rather than one flat vector of the whole model). A parameter of n values has
chunks of s = ⌈n/N⌉; the last rank's chunk is shorter (or empty) and the padding is
zeros that only ever travel through the collectives. Stages 1-2 move each piece in
its own collectives (``gather``, ``reduce_grad``); stage 3 moves a unit's pieces
together (:mod:`snippets.parallel.sharded.zero_units`) through ``fill`` and
``take_grad``.

The two collectives are wrapped so that every element handed to the API is counted:
gloo builds reduce-scatter on all-reduce, so its wire traffic says nothing about the
algorithm; the paper's volumes (Ψ for a reduce-scatter, Ψ for an all-gather) are what
the calls are given.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
import torch.nn as nn

from snippets.core.claims import law


# --8<-- [start:comm]
class CommCounter:
    """Elements and bytes handed to each collective; the ZeRO paper's Ψ unit."""

    def __init__(self, group: dist.ProcessGroup | None = None):
        self.group = group
        self.reset()

    def reset(self) -> None:
        self.elements = {"all_gather": 0, "reduce_scatter": 0}
        self.bytes = {"all_gather": 0, "reduce_scatter": 0}
        self.calls = {"all_gather": 0, "reduce_scatter": 0}

    def _count(self, op: str, full: torch.Tensor) -> None:
        self.elements[op] += full.numel()
        self.bytes[op] += full.numel() * full.element_size()
        self.calls[op] += 1

    def all_gather(self, full: torch.Tensor, chunk: torch.Tensor, async_op=False):
        """full (N·s,) ← every rank's chunk (s,). ``async_op``: returns the work to
        ``wait()`` on, and ``full`` is not to be read before that."""
        work = dist.all_gather_single(full, chunk, group=self.group, async_op=async_op)
        self._count("all_gather", full)
        return work

    def reduce_scatter(self, chunk: torch.Tensor, full: torch.Tensor, async_op=False):
        """chunk (s,) ← Σ over ranks of this rank's slice of full (N·s,). SUM only:
        the mean is taken by dividing afterwards (gloo's AVG has been wrong).
        ``async_op``: as for ``all_gather``, neither tensor is to be touched before
        the work's ``wait()``."""
        work = dist.reduce_scatter_single(
            chunk, full, op=dist.ReduceOp.SUM, group=self.group, async_op=async_op
        )
        self._count("reduce_scatter", full)
        return work


# --8<-- [end:comm]


# --8<-- [start:piece]
class Piece:
    """One parameter and this rank's chunk of it, the tensor the inner optimizer
    steps. ``own_storage=False`` (stages 1-2): the chunk is a view into the full
    parameter, so it costs no memory of its own. ``True`` (stage 3): the chunk is the
    only copy that persists; the full parameter exists only between gather and free."""

    def __init__(self, param: nn.Parameter, comm: CommCounter, own_storage: bool):
        law(param.is_contiguous(), "parameters are sharded through a flat view")
        rank, N = dist.get_rank(comm.group), dist.get_world_size(comm.group)
        self.param, self.comm, self.N = param, comm, N
        self.n = param.numel()
        self.s = -(-self.n // N)  # ⌈n/N⌉: chunk size with padding
        self.a = min(self.n, rank * self.s)  # this rank's values [a, b) of the n
        self.b = min(self.n, self.a + self.s)
        piece = param.data.view(-1)[self.a : self.b]  # (b - a,)
        self.chunk = nn.Parameter(piece.clone() if own_storage else piece)
        self.is_full = True

    def padded(self, values: torch.Tensor, size: int, start: int) -> torch.Tensor:
        """values placed at [start, start + len) of zeros(size)."""
        out = values.new_zeros(size)
        out[start : start + values.numel()] = values
        return out

    def gather(self) -> None:
        """All-gather the chunks into the full parameter (allocating it if freed)."""
        full = self.chunk.data.new_empty(self.N * self.s)  # (N·s,)
        self.comm.all_gather(full, self.padded(self.chunk.data, self.s, 0))
        self.fill(full)

    def fill(self, full: torch.Tensor) -> None:
        """The gathered chunks, full (N·s,), become the parameter's n values."""
        storage = self.param.data.untyped_storage()
        if storage.nbytes() == 0:  # stage 3: give the freed parameter memory back
            storage.resize_(self.n * self.param.element_size())
        # .data: a copy that autograd's saved tensors do not see as an in-place edit
        self.param.data.view(-1).copy_(full[: self.n])
        self.is_full = True

    def free(self) -> None:
        """Stage 3: drop the full parameter's memory; the tensor keeps its shape."""
        self.param.data.untyped_storage().resize_(0)
        self.is_full = False

    def reduce_grad(self, into_param_grad: bool) -> None:
        """Reduce-scatter ∇param: this rank's chunk of the mean over ranks becomes
        chunk.grad. Into the full .grad's storage (stage 1), or a tensor of its own
        (stage 2, which then drops the full gradient)."""
        full = self.padded(self.param.grad.reshape(-1), self.N * self.s, 0)  # (N·s,)
        mine = full.new_empty(self.s)
        self.comm.reduce_scatter(mine, full)
        if into_param_grad:
            flat = self.param.grad.view(-1)
            flat[self.a : self.b] = mine[: self.b - self.a].div_(self.N)
            self.chunk.grad = flat[self.a : self.b]
        else:
            self.take_grad(mine)

    def take_grad(self, summed: torch.Tensor) -> None:
        """summed (s,): this rank's chunk of Σ over ranks of ∇param. ÷ N is the mean;
        it becomes chunk.grad, or adds to it (a second backward before step())."""
        mine = summed[: self.b - self.a] / self.N  # exactly b - a values of storage
        if self.chunk.grad is None:
            self.chunk.grad = mine
        else:
            self.chunk.grad += mine


# --8<-- [end:piece]


def storage_bytes(tensors) -> int:
    """Bytes of the distinct storages behind these tensors (views counted once)."""
    seen: dict[int, int] = {}
    for t in tensors:
        if isinstance(t, torch.Tensor):
            storage = t.untyped_storage()
            if storage.nbytes():
                seen[storage.data_ptr()] = storage.nbytes()
    return sum(seen.values())
