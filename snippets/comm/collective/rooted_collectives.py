"""The rooted collectives from point-to-point: broadcast, reduce, scatter and gather,
where one rank (``src`` or ``dst``, a global rank, as in torch) is the root.

Each takes the same arguments as the ``torch.distributed`` function of the same name
and changes the same tensors in place. The schedules are the textbook ones (Thakur,
Rabenseifner & Gropp 2005): binomial trees for broadcast and reduce, where the data
must be copied or combined on the way; a flat fan-out and fan-in for scatter and
gather, where the root has p−1 different pieces to move anyway.

Before any data moves, the ranks swap a few integers (sizes, dtype, and any problem
they found) through ``agree``, so bad input raises on every rank instead of leaving
one of them waiting for a message that never comes.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch.distributed import ReduceOp

from snippets.comm.messages import note_send, wait_all
from snippets.comm.plumbing import (
    agree_on_size,
    async_problem,
    combine_,
    finish_,
    group_ranks,
    list_problem,
    op_problem,
    peer_problem,
)


# --8<-- [start:trees]
def broadcast(
    tensor: torch.Tensor,
    src: int,
    group: dist.ProcessGroup | None = None,
    async_op: bool = False,
    trace: list | None = None,
) -> None:
    """Binomial tree: in round k every rank that has the data sends it 2^k ranks
    further, so ⌈log2 p⌉ rounds instead of the root sending p−1 times. ``trace``,
    where given, gets a ``Send`` per message (here and below: an animation's data)."""
    ranks, me = group_ranks(group)
    problem = peer_problem(src, ranks, "src") or async_problem(async_op)
    agree_on_size(tensor, group, "broadcast", problem)
    p, root = len(ranks), ranks.index(src)
    v = (me - root) % p  # my rank relative to the root
    mask = 1
    while mask < p:  # receive once, from the rank that differs in my lowest set bit
        if v & mask:
            dist.recv(tensor, ranks[(v - mask + root) % p], group=group)
            break
        mask <<= 1
    works, mask = [], mask >> 1
    while mask > 0:  # then forward to the ranks below me in the tree
        if v + mask < p:
            to, n = ranks[(v + mask + root) % p], tensor.numel()
            step = (p - 1).bit_length() - mask.bit_length()  # the root's first is 0
            note_send(trace, step, to, 0, n, n * tensor.element_size(), "broadcast")
            works.append(dist.isend(tensor, to, group=group))
        mask >>= 1
    wait_all(works)


def reduce(
    tensor: torch.Tensor,
    dst: int,
    op: ReduceOp = ReduceOp.SUM,
    group: dist.ProcessGroup | None = None,
    async_op: bool = False,
    trace: list | None = None,
) -> None:
    """Binomial tree run backwards: partial results meet at the root in ⌈log2 p⌉
    rounds. Only ``dst`` gets the result; other ranks' tensors are left as they were."""
    ranks, me = group_ranks(group)
    problem = (
        peer_problem(dst, ranks, "dst")
        or async_problem(async_op)
        or op_problem(tensor, op)
    )
    agree_on_size(tensor, group, "reduce", problem)
    p, root = len(ranks), ranks.index(dst)
    v = (me - root) % p
    acc = tensor if v == 0 else tensor.clone()  # (n,): never write a non-root's input
    buf, mask = torch.empty_like(tensor), 1
    while mask < p:
        if v & mask:
            to, n = ranks[(v - mask + root) % p], acc.numel()
            step = mask.bit_length() - 1
            note_send(trace, step, to, 0, n, n * acc.element_size(), "reduce")
            dist.send(acc, to, group=group)
            break
        if v + mask < p:
            dist.recv(buf, ranks[(v + mask + root) % p], group=group)
            combine_(acc, buf, op)
        mask <<= 1
    if v == 0:
        finish_(tensor, op, p)


# --8<-- [end:trees]


# --8<-- [start:fans]
def scatter(
    tensor: torch.Tensor,
    scatter_list: list[torch.Tensor] | None = None,
    src: int = 0,
    group: dist.ProcessGroup | None = None,
    async_op: bool = False,
    trace: list | None = None,
) -> None:
    """The root sends piece j straight to rank j: p−1 messages, all in flight."""
    ranks, me = group_ranks(group)
    problem = peer_problem(src, ranks, "src") or async_problem(async_op)
    if not problem and ranks[me] == src:
        problem = list_problem(scatter_list, tensor, len(ranks), "scatter_list")
    agree_on_size(tensor, group, "scatter", problem)
    if ranks[me] != src:
        dist.recv(tensor, src, group=group)
        return
    works = []
    for j, (piece, r) in enumerate(zip(scatter_list, ranks)):
        if r != src:
            size = piece.numel() * piece.element_size()
            note_send(trace, 0, r, j, j + 1, size, "scatter")  # piece j
            works.append(dist.isend(piece.contiguous(), r, group=group))
    tensor.copy_(scatter_list[me])
    wait_all(works)


def gather(
    tensor: torch.Tensor,
    gather_list: list[torch.Tensor] | None = None,
    dst: int = 0,
    group: dist.ProcessGroup | None = None,
    async_op: bool = False,
    trace: list | None = None,
) -> None:
    """Every rank sends its tensor straight to the root, which receives all p−1."""
    ranks, me = group_ranks(group)
    problem = peer_problem(dst, ranks, "dst") or async_problem(async_op)
    if not problem and ranks[me] == dst:
        problem = list_problem(gather_list, tensor, len(ranks), "gather_list")
    agree_on_size(tensor, group, "gather", problem)
    if ranks[me] != dst:
        size = tensor.numel() * tensor.element_size()
        note_send(trace, 0, dst, me, me + 1, size, "gather")  # into slot me
        dist.send(tensor.contiguous(), dst, group=group)
        return
    works = [
        dist.irecv(out, r, group=group)
        for out, r in zip(gather_list, ranks)
        if r != dst
    ]
    gather_list[me].copy_(tensor)
    wait_all(works)


# --8<-- [end:fans]
