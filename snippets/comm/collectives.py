"""Every collective from point-to-point: broadcast, scatter, gather, reduce, all_gather,
reduce_scatter, all_to_all and barrier, built only from ``dist.isend``/``dist.irecv``.

Each function takes the same arguments as the ``torch.distributed`` function of the same
name and changes the same tensors in place; ``src``/``dst`` are global ranks, like torch.
The schedules are the textbook ones (Thakur, Rabenseifner & Gropp 2005): binomial trees for
broadcast and reduce, a flat fan-out/fan-in for scatter and gather, a ring for all_gather
and reduce_scatter, pairwise exchange for all_to_all, and a dissemination barrier.

Before any data moves, the ranks swap a few integers (sizes, dtype, op, and any problem
they found): one round of tiny messages. Inconsistent input then raises ``ValueError`` on
every rank instead of leaving one of them waiting for a message that never comes.

    python -m snippets.comm.collectives          # 4 ranks, each collective against torch's
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch.distributed import ReduceOp

from snippets.comm.plumbing import (
    agree,
    agree_on_size,
    combine_,
    exchange,
    finish_,
    group_ranks,
    op_problem,
    wait_all,
)
from snippets.core.cli import main_entry
from snippets.core.runtime import Spec, device, print0

SPEC = Spec(
    summary="broadcast, scatter, gather, reduce, all_gather, reduce_scatter, all_to_all, barrier "
    "from send/recv",
    world_size=4,
)


def _check_peer(peer: int, ranks: list[int], name: str) -> str:
    return (
        ""
        if peer in ranks
        else f"{name}={peer} is not a rank of this group (ranks {ranks})"
    )


# --8<-- [start:rooted]
def broadcast(
    tensor: torch.Tensor,
    src: int,
    group: dist.ProcessGroup | None = None,
    async_op: bool = False,
) -> None:
    """Binomial tree: in round k every rank that has the data sends it 2^k ranks further,
    so ⌈log2 p⌉ rounds instead of the root sending p−1 times."""
    ranks, me = group_ranks(group)
    agree_on_size(
        tensor,
        group,
        "broadcast",
        _check_peer(src, ranks, "src") or _no_async(async_op),
    )
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
            works.append(dist.isend(tensor, ranks[(v + mask + root) % p], group=group))
        mask >>= 1
    wait_all(works)


def reduce(
    tensor: torch.Tensor,
    dst: int,
    op: ReduceOp = ReduceOp.SUM,
    group: dist.ProcessGroup | None = None,
    async_op: bool = False,
) -> None:
    """Binomial tree run backwards: partial results meet at the root in ⌈log2 p⌉ rounds.
    Only ``dst`` gets the result; the other ranks' tensors are left as they were."""
    ranks, me = group_ranks(group)
    problem = (
        _check_peer(dst, ranks, "dst") or _no_async(async_op) or op_problem(tensor, op)
    )
    agree_on_size(tensor, group, "reduce", problem)
    p, root = len(ranks), ranks.index(dst)
    v = (me - root) % p
    acc = (
        tensor if v == 0 else tensor.clone()
    )  # (n,), never write into a non-root's input
    buf, mask = torch.empty_like(tensor), 1
    while mask < p:
        if v & mask:
            dist.send(acc, ranks[(v - mask + root) % p], group=group)
            break
        if v + mask < p:
            dist.recv(buf, ranks[(v + mask + root) % p], group=group)
            combine_(acc, buf, op)
        mask <<= 1
    if v == 0:
        finish_(tensor, op, p)


def scatter(
    tensor: torch.Tensor,
    scatter_list: list[torch.Tensor] | None = None,
    src: int = 0,
    group: dist.ProcessGroup | None = None,
    async_op: bool = False,
) -> None:
    """The root sends piece j straight to rank j: p−1 messages, all in flight at once."""
    ranks, me = group_ranks(group)
    problem = _check_peer(src, ranks, "src") or _no_async(async_op)
    if not problem and ranks[me] == src:
        problem = _list_problem(scatter_list, tensor, len(ranks), "scatter_list")
    agree_on_size(tensor, group, "scatter", problem)
    if ranks[me] != src:
        dist.recv(tensor, src, group=group)
        return
    works = [
        dist.isend(piece.contiguous(), r, group=group)
        for piece, r in zip(scatter_list, ranks)
        if r != src
    ]
    tensor.copy_(scatter_list[me])
    wait_all(works)


def gather(
    tensor: torch.Tensor,
    gather_list: list[torch.Tensor] | None = None,
    dst: int = 0,
    group: dist.ProcessGroup | None = None,
    async_op: bool = False,
) -> None:
    """Every rank sends its tensor straight to the root, which receives all p−1 at once."""
    ranks, me = group_ranks(group)
    problem = _check_peer(dst, ranks, "dst") or _no_async(async_op)
    if not problem and ranks[me] == dst:
        problem = _list_problem(gather_list, tensor, len(ranks), "gather_list")
    agree_on_size(tensor, group, "gather", problem)
    if ranks[me] != dst:
        dist.send(tensor.contiguous(), dst, group=group)
        return
    works = [
        dist.irecv(out, r, group=group)
        for out, r in zip(gather_list, ranks)
        if r != dst
    ]
    gather_list[me].copy_(tensor)
    wait_all(works)


# --8<-- [end:rooted]


def _no_async(async_op: bool) -> str:
    return (
        "async_op=True is not supported by these hand-made collectives"
        if async_op
        else ""
    )


def _list_problem(tensors: list | None, like: torch.Tensor, p: int, name: str) -> str:
    if tensors is None or len(tensors) != p:
        return f"{name} must hold {p} tensors (one per rank), got {None if tensors is None else len(tensors)}"
    if any(t.numel() != like.numel() or t.dtype != like.dtype for t in tensors):
        return f"every tensor in {name} must have numel {like.numel()} and dtype {like.dtype}"
    return ""


# --8<-- [start:everyone]
def all_gather(
    tensor_list: list[torch.Tensor],
    tensor: torch.Tensor,
    group: dist.ProcessGroup | None = None,
    async_op: bool = False,
) -> None:
    """Ring: in step k each rank passes the piece it got in step k−1 to its right-hand
    neighbour; after p−1 steps every rank holds every piece."""
    ranks, me = group_ranks(group)
    p = len(ranks)
    problem = _list_problem(tensor_list, tensor, p, "tensor_list") or _no_async(
        async_op
    )
    agree_on_size(tensor, group, "all_gather", problem)
    right, left = ranks[(me + 1) % p], ranks[(me - 1) % p]
    tensor_list[me].copy_(tensor)
    for k in range(p - 1):
        piece = tensor_list[(me - k) % p].contiguous().view(-1)
        wait_all(
            exchange(
                piece,
                0,
                piece.numel(),
                right,
                tensor_list[(me - k - 1) % p],
                left,
                group,
            )
        )


def reduce_scatter(
    output: torch.Tensor,
    input_list: list[torch.Tensor],
    op: ReduceOp = ReduceOp.SUM,
    group: dist.ProcessGroup | None = None,
    async_op: bool = False,
) -> None:
    """Ring: the partial sum of piece c travels once around the ring, picking up one rank's
    contribution per step, and arrives complete at rank c after p−1 steps."""
    ranks, me = group_ranks(group)
    p = len(ranks)
    problem = (
        _list_problem(input_list, output, p, "input_list")
        or _no_async(async_op)
        or op_problem(output, op)
    )
    agree_on_size(output, group, "reduce_scatter", problem)
    right, left = ranks[(me + 1) % p], ranks[(me - 1) % p]
    partial = input_list[
        (me - 1) % p
    ].clone()  # (n,): my contribution to the piece I send first
    incoming = torch.empty_like(output)
    for k in range(p - 1):  # receive the partial of piece (me − k − 2) mod p
        wait_all(
            exchange(partial.view(-1), 0, partial.numel(), right, incoming, left, group)
        )
        combine_(incoming, input_list[(me - k - 2) % p], op)
        partial, incoming = (
            incoming,
            partial,
        )  # the sent buffer is free again: it takes the next one
    output.copy_(partial)
    finish_(output, op, p)


def all_to_all(
    output_tensor_list: list[torch.Tensor],
    input_tensor_list: list[torch.Tensor],
    group: dist.ProcessGroup | None = None,
    async_op: bool = False,
) -> None:
    """Pairwise exchange: rank i's input piece j lands in rank j's output slot i. Sizes may
    differ per pair, but what i sends to j must match what j expects from i."""
    ranks, me = group_ranks(group)
    p = len(ranks)
    problem = _no_async(async_op)
    if not problem and (len(output_tensor_list) != p or len(input_tensor_list) != p):
        problem = (
            f"all_to_all needs {p} output and {p} input tensors, "
            f"got {len(output_tensor_list)} and {len(input_tensor_list)}"
        )
    sizes = (
        [0] * 2 * p
        if problem
        else [t.numel() for t in input_tensor_list + output_tensor_list]
    )
    seen = agree(sizes, problem, group)
    bad = [(i, j) for i in range(p) for j in range(p) if seen[i][j] != seen[j][p + i]]
    if bad:
        i, j = bad[0]
        raise ValueError(
            f"all_to_all: rank {ranks[i]} sends {seen[i][j]} elements to rank {ranks[j]}, "
            f"which expects {seen[j][p + i]}"
        )
    works = []
    for k in range(
        1, p
    ):  # step k: send to the rank k to my right, receive from the rank k to my left
        works.append(
            dist.isend(
                input_tensor_list[(me + k) % p].contiguous(),
                ranks[(me + k) % p],
                group=group,
            )
        )
        works.append(
            dist.irecv(
                output_tensor_list[(me - k) % p], ranks[(me - k) % p], group=group
            )
        )
    output_tensor_list[me].copy_(input_tensor_list[me])
    wait_all(works)


def barrier(group: dist.ProcessGroup | None = None, async_op: bool = False) -> None:
    """Dissemination barrier (Hensgen, Finkel & Manber 1988): in round k rank i signals
    rank i+2^k and waits for rank i−2^k; after ⌈log2 p⌉ rounds everyone has heard,
    directly or not, from everyone."""
    ranks, me = group_ranks(group)
    p, k = len(ranks), 1
    token, got = torch.zeros(1, device=device()), torch.empty(1, device=device())
    while k < p:
        wait_all(
            exchange(token, 0, 1, ranks[(me + k) % p], got, ranks[(me - k) % p], group)
        )
        k <<= 1


# --8<-- [end:everyone]


SCHEDULES = {  # collective: (schedule, rounds of messages on the critical path as a function of p)
    "broadcast": ("binomial tree", "⌈log2 p⌉"),
    "reduce": ("binomial tree", "⌈log2 p⌉"),
    "scatter": ("flat fan-out", "1 (root sends p−1)"),
    "gather": ("flat fan-in", "1 (root receives p−1)"),
    "all_gather": ("ring", "p−1"),
    "reduce_scatter": ("ring", "p−1"),
    "all_to_all": ("pairwise exchange", "p−1"),
    "barrier": ("dissemination", "⌈log2 p⌉"),
}


def _same_on_all(ours: object, theirs: object) -> bool:
    if isinstance(ours, list):
        return all(torch.equal(a, b) for a, b in zip(ours, theirs))
    return torch.equal(ours, theirs)


def main() -> dict:
    """Run each hand-made collective and torch's own on the same int64 input; they must agree exactly."""
    p, me, dev = dist.get_world_size(), dist.get_rank(), device()
    g = torch.Generator().manual_seed(1234 + me)

    def rand(n: int) -> torch.Tensor:
        return torch.randint(-9, 10, (n,), generator=g, dtype=torch.int64).to(dev)

    n, root = 5, p - 1  # an odd length, and a root that is not rank 0
    x, pieces = rand(n), [rand(n) for _ in range(p)]
    uneven_in = [
        rand((me + j) % 3 + 1) for j in range(p)
    ]  # rank i sends (i + j) % 3 + 1 elements to j
    uneven_out = [
        torch.empty((j + me) % 3 + 1, dtype=torch.int64, device=dev) for j in range(p)
    ]
    uneven_ref = [torch.empty_like(t) for t in uneven_out]

    def both(
        name: str, ours, theirs, make
    ):  # make() → fresh (args, result-to-compare) for each side
        a_args, a_out = make()
        ours(*a_args)
        b_args, b_out = make()
        theirs(*b_args)
        return a_out, b_out

    checks = {
        "broadcast": both(
            "broadcast",
            lambda t: broadcast(t, src=root),
            lambda t: dist.broadcast(t, src=root),
            lambda: ((t := x.clone(),), t),
        ),
        "scatter": both(
            "scatter",
            lambda t, lst: scatter(t, lst if me == root else None, src=root),
            lambda t, lst: dist.scatter(t, lst if me == root else None, src=root),
            lambda: ((t := torch.empty_like(x), [q.clone() for q in pieces]), t),
        ),
        "gather": both(
            "gather",
            lambda t, lst: gather(t, lst if me == root else None, dst=root),
            lambda t, lst: dist.gather(t, lst if me == root else None, dst=root),
            lambda: (
                (x, lst := [torch.empty_like(x) for _ in range(p)]),
                lst if me == root else [],
            ),
        ),
        "reduce": both(
            "reduce",
            lambda t: reduce(t, dst=root, op=ReduceOp.MAX),
            lambda t: dist.reduce(t, dst=root, op=ReduceOp.MAX),
            lambda: ((t := x.clone(),), t if me == root else x),
        ),
        "all_gather": both(
            "all_gather",
            all_gather,
            dist.all_gather,
            lambda: ((lst := [torch.empty_like(x) for _ in range(p)], x), lst),
        ),
        "reduce_scatter": both(
            "reduce_scatter",
            reduce_scatter,
            dist.reduce_scatter,
            lambda: ((t := torch.empty_like(x), pieces), t),
        ),
    }
    checks["all_to_all"] = both(
        "all_to_all",
        all_to_all,
        dist.all_to_all,
        lambda: ((lst := [torch.empty_like(x) for _ in range(p)], pieces), lst),
    )
    all_to_all(
        uneven_out, uneven_in
    )  # gloo's own all_to_all wants equal pieces: the oracle is all_gather_object
    everyone: list = [None] * p
    dist.all_gather_object(everyone, [t.cpu() for t in uneven_in])
    checks["all_to_all, uneven"] = (
        uneven_out,
        [everyone[j][me].to(dev) for j in range(p)],
    )
    barrier()  # nothing to compare: that every rank returns is the check
    checks["barrier"] = (x, x)
    rows = []
    for name, (ours, theirs) in checks.items():
        assert _same_on_all(ours, theirs), f"rank {me}: {name} differs from dist.{name}"
        schedule, rounds = SCHEDULES[name.split(",")[0]]
        verdict = "every rank got through ✓" if name == "barrier" else "== torch's ✓"
        rows.append(
            {
                "collective": name,
                "schedule": schedule,
                "rounds": rounds,
                "check": verdict,
            }
        )
    print0(f"{p} ranks, int64, length {n}, root {root}; all_to_all with uneven pieces")
    for row in rows:
        print0(
            f"  {row['collective']:<18} {row['schedule']:<18} rounds {row['rounds']:<20} {row['check']}"
        )
    return {"tables": {"schedules": rows}, "world_size": p}


if __name__ == "__main__":
    raise SystemExit(main_entry(main, SPEC))
