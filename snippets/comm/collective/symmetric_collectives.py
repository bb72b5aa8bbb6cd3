"""The collectives with no root, where every rank plays the same part, from
point-to-point: all_gather, reduce_scatter, all_to_all and barrier.

Each takes the same arguments as the ``torch.distributed`` function of the same name
and changes the same tensors in place. Schedules (Thakur, Rabenseifner & Gropp 2005):
a ring for all_gather and reduce_scatter, pairwise exchange for all_to_all, and a
dissemination barrier (Hensgen, Finkel & Manber 1988). As in the rooted ones, the
ranks ``agree`` on sizes first, so bad input raises on every rank.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch.distributed import ReduceOp

from snippets.comm.messages import exchange, note_send, wait_all
from snippets.comm.plumbing import (
    agree,
    agree_on_size,
    async_problem,
    combine_,
    finish_,
    group_ranks,
    list_problem,
    op_problem,
)
from snippets.core.runtime import device


# --8<-- [start:everyone]
def all_gather(
    tensor_list: list[torch.Tensor],
    tensor: torch.Tensor,
    group: dist.ProcessGroup | None = None,
    async_op: bool = False,
    trace: list | None = None,
) -> None:
    """Ring: in step k each rank passes the piece it got in step k−1 to its right-hand
    neighbour; after p−1 steps every rank holds every piece. ``trace``, where given,
    gets a ``Send`` per message, naming the piece it fills (an animation's data)."""
    ranks, me = group_ranks(group)
    p = len(ranks)
    problem = list_problem(tensor_list, tensor, p, "tensor_list")
    agree_on_size(tensor, group, "all_gather", problem or async_problem(async_op))
    right, left = ranks[(me + 1) % p], ranks[(me - 1) % p]
    tensor_list[me].copy_(tensor)
    for k in range(p - 1):
        piece = tensor_list[(me - k) % p].contiguous().view(-1)
        into = tensor_list[(me - k - 1) % p]
        c, size = (me - k) % p, piece.numel() * piece.element_size()
        note_send(trace, k, right, c, c + 1, size, "all-gather")
        wait_all(exchange(piece, 0, piece.numel(), right, into, left, group))


def reduce_scatter(
    output: torch.Tensor,
    input_list: list[torch.Tensor],
    op: ReduceOp = ReduceOp.SUM,
    group: dist.ProcessGroup | None = None,
    async_op: bool = False,
    trace: list | None = None,
) -> None:
    """Ring: the partial result for piece c travels once around the ring, picking up
    one rank's contribution per step, and arrives complete at rank c after p−1 steps."""
    ranks, me = group_ranks(group)
    p = len(ranks)
    problem = (
        list_problem(input_list, output, p, "input_list")
        or async_problem(async_op)
        or op_problem(output, op)
    )
    agree_on_size(output, group, "reduce_scatter", problem)
    right, left = ranks[(me + 1) % p], ranks[(me - 1) % p]
    partial = input_list[(me - 1) % p].clone()  # (n,): my part of what I send first
    incoming = torch.empty_like(output)
    for k in range(p - 1):  # receive the partial of piece (me − k − 2) mod p
        flat = partial.view(-1)
        c, size = (me - k - 1) % p, flat.numel() * flat.element_size()
        note_send(trace, k, right, c, c + 1, size, "reduce-scatter")  # piece c
        wait_all(exchange(flat, 0, flat.numel(), right, incoming, left, group))
        combine_(incoming, input_list[(me - k - 2) % p], op)
        partial, incoming = incoming, partial  # the sent buffer takes the next one
    output.copy_(partial)
    finish_(output, op, p)


def all_to_all(
    output_tensor_list: list[torch.Tensor],
    input_tensor_list: list[torch.Tensor],
    group: dist.ProcessGroup | None = None,
    async_op: bool = False,
    trace: list | None = None,
) -> None:
    """Pairwise exchange: rank i's input piece j lands in rank j's output slot i.
    Sizes may differ per pair, but what i sends to j must be what j expects from i."""
    ranks, me = group_ranks(group)
    p = len(ranks)
    outs, ins = output_tensor_list, input_tensor_list
    problem = async_problem(async_op)
    if not problem and (len(outs) != p or len(ins) != p):
        problem = (
            f"all_to_all needs {p} outputs and {p} inputs: {len(outs)}, {len(ins)}"
        )
    sizes = [0] * 2 * p if problem else [t.numel() for t in ins + outs]
    seen = agree(sizes, problem, group)  # seen[i][j]: i → j; seen[j][p + i]: j ← i
    bad = [(i, j) for i in range(p) for j in range(p) if seen[i][j] != seen[j][p + i]]
    if bad:
        i, j = bad[0]
        raise ValueError(
            f"all_to_all: rank {ranks[i]} sends {seen[i][j]} elements to rank "
            f"{ranks[j]}, which expects {seen[j][p + i]}"
        )
    works = []
    for k in range(1, p):  # send k ranks to my right, receive from k to my left
        to, frm = (me + k) % p, (me - k) % p
        c, size = me * p + to, ins[to].numel() * ins[to].element_size()
        note_send(trace, k - 1, ranks[to], c, c + 1, size, "all-to-all")  # (me → to)
        works.append(dist.isend(ins[to].contiguous(), ranks[to], group=group))
        works.append(dist.irecv(outs[frm], ranks[frm], group=group))
    outs[me].copy_(ins[me])
    wait_all(works)


def barrier(group: dist.ProcessGroup | None = None, async_op: bool = False) -> None:
    """Dissemination barrier: in round k rank i signals rank i+2^k and waits for rank
    i−2^k; after ⌈log2 p⌉ rounds everyone has heard, directly or not, from everyone."""
    ranks, me = group_ranks(group)
    if async_op:
        raise ValueError(async_problem(async_op))
    p, k = len(ranks), 1
    token, got = torch.zeros(1, device=device()), torch.empty(1, device=device())
    while k < p:
        right, left = ranks[(me + k) % p], ranks[(me - k) % p]
        wait_all(exchange(token, 0, 1, right, got, left, group))
        k <<= 1


# --8<-- [end:everyone]
