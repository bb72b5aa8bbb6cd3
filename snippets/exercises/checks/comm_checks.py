"""Exercises of "Distributed training, by hand": collectives built from send and recv.

Each check runs on every rank. Inputs are small integers in floating point, so a sum
is exact whatever order a rank adds in, and the oracle (the built-in collective, called
by the grader outside the reader's code) compares bit for bit.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch.distributed import ReduceOp

from snippets.attention.ring_pass import start_pass
from snippets.comm.algorithms.naive_allreduce import naive_allreduce
from snippets.comm.algorithms.ring_allreduce import ring_allreduce
from snippets.comm.collective.all_to_all import all_to_all_single
from snippets.comm.collective.rooted_collectives import broadcast
from snippets.comm.collective.symmetric_collectives import all_gather, reduce_scatter
from snippets.exercises.engine import Call, Exercise, Grade, Watcher

EMPTY = -100.0  # what an output holds before the reader's code writes it


def integers(shape: tuple[int, ...], seed: int) -> torch.Tensor:
    """Small integers as float32: every partial sum is exact."""
    g = torch.Generator().manual_seed(seed)
    return torch.randint(-8, 9, shape, generator=g).to(torch.float32)


def allreduce_cases(fn, grade: Grade, cases, left_out, whose: str) -> None:
    """Each (shape, op): ``fn``'s answer against ``dist.all_reduce`` on the same
    tensors, and the wrong answers that name a mistake: the tensor unchanged, the sum
    averaged, or the sum without ``left_out(mine)``, ``whose`` tensor."""
    rank, p = grade.rank, grade.world_size
    for shape, op in cases:
        with grade.case(f"{op} of a {tuple(shape)} tensor") as case:
            mine = integers(shape, seed=100 * rank + len(shape))
            expected = mine.clone()
            dist.all_reduce(expected, op=getattr(ReduceOp, op))  # the oracle
            missing = left_out(mine)
            got = mine.clone()
            case.call(fn, got, getattr(ReduceOp, op))
            case.equal(
                got,
                expected,
                "the tensor",
                mistakes=(
                    (mine, "the tensor is unchanged: write the result into it"),
                    (expected / p, "each element is the sum ÷ p: SUM keeps the sum"),
                    (expected - missing, f"the sum leaves out {whose} own tensor"),
                ),
            )


def roots(mine: torch.Tensor) -> torch.Tensor:
    """Rank 0's tensor, on every rank."""
    root = mine.clone()
    dist.broadcast(root, 0)
    return root


def check_ring_allreduce(fn, grade: Grade) -> None:
    rank, p = grade.rank, grade.world_size
    cases = (((1,), "SUM"), ((7,), "SUM"), ((3, 5), "SUM"), ((13,), "MAX"))
    allreduce_cases(fn, grade, cases, lambda mine: mine, "this rank's")
    n = 4 * p + 3  # every chunk non-empty, and not all of one size
    with grade.case(f"only neighbours, 2(p-1) = {2 * (p - 1)} sends") as case:
        case.call(fn, integers((n,), seed=rank))
        right, left = (rank + 1) % p, (rank - 1) % p
        sends, recvs = data_calls(case)  # float64 on the wire counts too
        data = sends + recvs
        case.expect(
            all(c.peer == right for c in sends) and all(c.peer == left for c in recvs),
            f"it talks to ranks other than its neighbours {left} and {right}",
            *(f"call: {c}" for c in data if c.peer not in (left, right)),
        )
        case.expect(
            len(sends) == 2 * (p - 1),
            f"it sent {len(sends)} messages; a ring sends 2(p-1) = {2 * (p - 1)}",
            "hint: p-1 steps of reduce-scatter, then p-1 of all-gather",
        )


def data_calls(case) -> tuple[list[Call], list[Call]]:
    """The reader's sends and receives of data, of any floating dtype, not a size
    check (the project's collectives swap sizes as int64 first)."""
    data = [c for c in case.calls if not c.dtype.startswith(("int", "uint", "bool"))]
    sends = [c for c in data if c.kind in ("send", "isend")]
    recvs = [c for c in data if c.kind in ("recv", "irecv")]
    return sends, recvs


def ring_traffic(case, grade: Grade, steps: int, hint: str) -> None:
    """Every data message goes right, every receive comes from the left, and the rank
    sends ``steps`` of them."""
    rank, p = grade.rank, grade.world_size
    right, left = (rank + 1) % p, (rank - 1) % p
    sends, recvs = data_calls(case)
    astray = [c for c in sends if c.peer != right] + [
        c for c in recvs if c.peer != left
    ]
    case.expect(
        not astray,
        f"rank {rank} should send only to rank {right} and receive only from rank "
        f"{left}: its neighbours in the ring",
        *(f"call: {c}" for c in astray),
    )
    case.expect(
        len(sends) == steps and len(recvs) == steps,
        f"it sent {len(sends)} and received {len(recvs)} messages; a ring moves "
        f"{steps} each way",
        f"hint: {hint}",
    )


def _pass(fn, t: torch.Tensor, group, tag: int, waited: list | None = None):
    """The reader's ``start_pass``, then a wait on each request it returned (what
    ``finish_pass`` does), inside the watched call: the incoming tensor. ``waited``,
    where given, gets what the reader's code waited on before it returned."""
    grade = Watcher.installed.grade if Watcher.installed else None
    if grade is not None and waited is not None:  # note each wait, then wait
        real = grade.waiting
        grade.waiting = lambda call: (waited.append(call), real(call))[1]
    try:
        pending = fn(t, group, tag)
    finally:
        if grade is not None and waited is not None:
            del grade.waiting  # the method again
    if not (isinstance(pending, (tuple, list)) and len(pending) == 2):
        raise TypeError(
            f"start_pass returned {type(pending).__name__}; it returns "
            "(requests, incoming)"
        )
    works, incoming = pending
    for w in works:
        if not w.is_completed():  # gloo's send blocks on a second wait, for ever
            w.wait()
    return incoming


def check_ring_pass(fn, grade: Grade) -> None:
    rank, p = grade.rank, grade.world_size
    left, right = (rank - 1) % p, (rank + 1) % p
    tensors = (
        ("a (1,) tensor", integers((1,), seed=rank)),
        ("a (3, 4) tensor", integers((3, 4), seed=10 + rank)),
        ("a transposed (4, 3) tensor: not contiguous", integers((3, 4), 20 + rank).t()),
    )
    for title, t in tensors:
        with grade.case(title) as case:
            everyone = [torch.empty(t.shape) for _ in range(p)]
            dist.all_gather(everyone, t.contiguous())  # the oracle
            before = t.clone()
            got = case.call(_pass, fn, t, None, 0)
            case.equal(
                got,
                everyone[left],
                "what arrived",
                mistakes=(
                    (t, "it is this rank's own tensor: return the receive's buffer"),
                    (
                        everyone[right],
                        f"that is rank {right}'s: send right, receive from the left",
                    ),
                ),
            )
            case.expect(
                torch.equal(t, before),
                "the tensor it sent changed: receive into a new buffer",
            )
    with grade.case("one send right, one receive from the left, not waited on") as case:
        waited: list[Call] = []
        case.call(_pass, fn, integers((6,), seed=30 + rank), None, 0, waited)
        ring_traffic(case, grade, 1, "one isend to the right, one irecv from the left")
        case.expect(
            not waited,
            f"start_pass waited on {waited[0] if waited else ''} before it returned",
            "hint: return the requests unwaited: the caller computes while the data "
            "moves, and waits when it needs it",
        )
    if p % 2 or p < 4:
        return
    halves = [dist.new_group(list(range(k, p, 2))) for k in (0, 1)]  # every rank
    group, q = halves[rank % 2], p // 2
    with grade.case(f"in two groups of {q}: the even ranks, the odd ranks") as case:
        t = integers((6,), seed=40 + rank)
        world = [torch.empty_like(t) for _ in range(p)]
        dist.all_gather(world, t)
        me = dist.get_rank(group)
        got = case.call(_pass, fn, t, group, 3)
        case.equal(
            got,
            world[(rank - 2) % p],  # the group's previous rank
            "what arrived",
            mistakes=(
                (
                    world[left],
                    f"it is global rank {left}'s tensor: go round the group, counting "
                    f"ranks in it (this rank is {me} of {q} there)",
                ),
            ),
        )


def check_tree_broadcast(fn, grade: Grade) -> None:
    rank, p = grade.rank, grade.world_size
    for src, shape in ((0, (1,)), (p - 1, (7,)), (1, (3, 5))):
        with grade.case(f"from rank {src}, a {shape} tensor") as case:
            mine = integers(shape, seed=10 * rank + src)
            expected = mine.clone()
            dist.broadcast(expected, src)  # the oracle
            rank0 = mine.clone()
            dist.broadcast(rank0, 0)
            got = mine.clone()
            case.call(fn, got, src)
            case.equal(
                got,
                expected,
                "the tensor",
                mistakes=(
                    (
                        mine,
                        f"the tensor is this rank's own: rank {src} is the root, "
                        "and every other rank receives",
                    ),
                    (rank0, "every rank got rank 0's tensor: the root is src"),
                ),
            )
    src, most = p - 1, (p - 1).bit_length()  # ⌈log2 p⌉
    with grade.case(f"a tree from rank {src}: one receive each, from a parent") as case:
        case.call(fn, integers((5,), seed=rank), src)
        sends, recvs = data_calls(case)
        everyone: list = [None] * p
        dist.all_gather_object(everyone, [c.peer for c in recvs])
        if rank == src:
            case.expect(not recvs, f"the root, rank {src}, receives: it has the data")
        else:
            case.expect(
                len(recvs) == 1,
                f"rank {rank} receives {len(recvs)} times: once, from its parent",
            )
        case.expect(
            len(sends) <= most,
            f"rank {rank} sends {len(sends)} messages; in a tree over {p} ranks none "
            f"sends more than ⌈log2 {p}⌉ = {most}",
            "hint: a rank that has the data passes it on, so the root need not send "
            "to everyone",
        )
        children = sorted(c.peer for c in sends)
        mine = sorted(r for r, got in enumerate(everyone) if got == [rank])
        case.expect(
            children == mine,
            f"rank {rank} sends to {children}, but {mine} receive from it",
        )
        deepest, hops = src, 0
        for r in range(p):
            d, at = 0, r
            while at != src and d <= p and len(everyone[at]) == 1:
                at, d = everyone[at][0], d + 1
            if at == src and d > hops:
                deepest, hops = r, d
        case.expect(
            hops <= most,
            f"the tree is {hops} deep (rank {deepest} is {hops} hops from the root); "
            f"a tree over {p} ranks is ⌈log2 {p}⌉ = {most} deep",
            "hint: not a chain: a rank that has the data sends it to more than one",
        )


def check_all_gather(fn, grade: Grade) -> None:
    rank, p = grade.rank, grade.world_size
    for shape in ((1,), (5,), (2, 3)):
        with grade.case(f"{p} pieces of {shape}") as case:
            mine = integers(shape, seed=10 * rank + len(shape))
            expected = [torch.empty_like(mine) for _ in range(p)]
            dist.all_gather(expected, mine)  # the oracle
            got = [torch.full_like(mine, EMPTY) for _ in range(p)]
            case.call(fn, got, mine.clone())
            own_missing = torch.stack(expected)
            own_missing[rank] = EMPTY
            case.equal(
                torch.stack(got),
                torch.stack(expected),
                "the pieces",
                unwritten=EMPTY,
                mistakes=(
                    (
                        own_missing,
                        f"piece {rank}, this rank's own, is empty: copy tensor into it",
                    ),
                ),
            )
    with grade.case(f"a ring: p-1 = {p - 1} sends to the right") as case:
        mine = integers((4,), seed=rank)
        case.call(fn, [torch.empty_like(mine) for _ in range(p)], mine)
        ring_traffic(case, grade, p - 1, "pass on the piece you got in the step before")


def check_reduce_scatter(fn, grade: Grade) -> None:
    rank, p = grade.rank, grade.world_size
    for shape, op in (((1,), "SUM"), ((5,), "SUM"), ((2, 3), "MAX")):
        with grade.case(f"{op} of {p} pieces of {shape}") as case:
            pieces = [integers(shape, seed=100 * rank + 10 * j) for j in range(p)]
            total = torch.stack(pieces)
            dist.all_reduce(total, op=getattr(ReduceOp, op))  # the oracle: all of
            expected = total[rank]  # them reduced, and this rank keeps its own piece
            inputs = [x.clone() for x in pieces]
            got = torch.full_like(expected, EMPTY)
            case.call(fn, got, inputs, getattr(ReduceOp, op))
            nxt, prev = (rank + 1) % p, (rank - 1) % p
            case.equal(
                got,
                expected,
                "the output",
                unwritten=EMPTY,
                mistakes=(
                    (expected / p, "each element is the sum ÷ p: SUM keeps the sum"),
                    (total[nxt], f"it is piece {nxt}'s result: rank r keeps piece r"),
                    (total[prev], f"it is piece {prev}'s result: rank r keeps piece r"),
                    (
                        expected - pieces[rank],
                        "it leaves out this rank's own input_list[rank]",
                    ),
                ),
            )
            case.expect(
                all(torch.equal(a, b) for a, b in zip(inputs, pieces)),
                "it changed input_list: reduce into a buffer of your own",
            )
    with grade.case(f"a ring: p-1 = {p - 1} sends to the right") as case:
        inputs = [integers((4,), seed=rank + 10 * j) for j in range(p)]
        case.call(fn, torch.empty(4), inputs, ReduceOp.SUM)
        ring_traffic(case, grade, p - 1, "send the partial you got, plus your piece")


def check_all_to_all(fn, grade: Grade) -> None:
    rank, p = grade.rank, grade.world_size
    uneven = [[(3 * i + 2 * j + 1) % (p + 1) for j in range(p)] for i in range(p)]
    to_one = [[3 if j == 0 else 0 for j in range(p)] for _ in range(p)]
    for title, rows, width in (
        ("equal splits (None)", None, 0),
        ("uneven splits, some empty, rows of 3", uneven, 3),
        ("every rank sends 3 rows to rank 0, none elsewhere", to_one, 2),
    ):
        with grade.case(title) as case:
            sends = rows[rank] if rows else None
            recvs = [rows[i][rank] for i in range(p)] if rows else None
            n_in, n_out = (sum(sends), sum(recvs)) if rows else (2 * p, 2 * p)
            shape = (n_in, width) if width else (n_in,)
            x = (torch.arange(torch.Size(shape).numel()) + 1000 * rank).reshape(shape)
            x = x.to(torch.float32)
            expected = torch.full((n_out, *shape[1:]), EMPTY)
            dist.all_to_all_single(expected, x, recvs, sends)  # the oracle
            got = torch.full_like(expected, EMPTY)
            if rows:
                case.on_raise = (
                    f"hint: rank {rank}'s input_split_sizes is {sends} and its "
                    f"output_split_sizes {recvs}: block j has that many rows, not "
                    "1/p of them"
                )
            case.call(fn, got, x.clone(), recvs, sends)
            own = recvs or [2] * p
            at = sum(own[:rank])
            own_missing = expected.clone()
            own_missing[at : at + own[rank]] = EMPTY
            case.equal(
                got,
                expected,
                "the output",
                unwritten=EMPTY,
                mistakes=(
                    (
                        own_missing,
                        f"block {rank}, this rank's own, is empty: it does not travel, "
                        "copy it",
                    ),
                ),
            )
            if rows is None:
                continue
            sent, _ = data_calls(case)
            promised = sorted(
                (j, sends[j] * width) for j in range(p) if j != rank and sends[j]
            )
            case.expect(
                sorted((c.peer, c.numel) for c in sent) == promised,
                f"rank {rank} should send {len(promised)} messages, one per non-empty "
                f"block for another rank: (rank, elements) {promised}",
                f"it sent: {[(c.peer, c.numel) for c in sent]}",
                "hint: one message per non-empty block; an empty block sends nothing",
            )


def check_naive_allreduce(fn, grade: Grade) -> None:
    rank, p = grade.rank, grade.world_size
    cases = (((1,), "SUM"), ((7,), "SUM"), ((3, 5), "MAX"))
    allreduce_cases(fn, grade, cases, roots, "the root's")
    n = 6
    with grade.case(f"through rank 0: {p - 1} messages in, {p - 1} out") as case:
        case.call(fn, integers((n,), seed=rank))
        sends, recvs = data_calls(case)
        peers = sorted({c.peer for c in sends + recvs})
        if rank == 0:
            case.expect(
                len(sends) == len(recvs) == p - 1 and peers == list(range(1, p)),
                f"the root receives once from, and sends once to, each of ranks "
                f"1..{p - 1}; it sent {len(sends)} and received {len(recvs)}",
                *(f"call: {c}" for c in sends + recvs),
            )
        else:
            case.expect(
                len(sends) == len(recvs) == 1 and peers == [0],
                f"rank {rank} sends its tensor once, to rank 0, and receives the "
                f"total once, from it; it sent {len(sends)} and received "
                f"{len(recvs)}, with ranks {peers}",
                "hint: every rank other than the root talks only to the root",
            )
        case.expect(
            all(c.numel == n for c in sends + recvs),
            f"each message carries the whole tensor, {n} elements",
            *(f"call: {c}" for c in sends + recvs if c.numel != n),
        )


CHECKS = [
    Exercise(
        name="ring_allreduce",
        function=ring_allreduce,
        check=check_ring_allreduce,
        world_sizes=(4, 3),
        point_to_point=True,
    ),
    Exercise(
        name="ring_pass",
        function=start_pass,
        check=check_ring_pass,
        world_sizes=(4, 3),
        point_to_point=True,
    ),
    Exercise(
        name="tree_broadcast",
        function=broadcast,
        check=check_tree_broadcast,
        world_sizes=(4, 3),
        point_to_point=True,
    ),
    Exercise(
        name="all_gather",
        function=all_gather,
        check=check_all_gather,
        world_sizes=(4, 3),
        point_to_point=True,
    ),
    Exercise(
        name="reduce_scatter",
        function=reduce_scatter,
        check=check_reduce_scatter,
        world_sizes=(4, 3),
        point_to_point=True,
    ),
    Exercise(
        name="all_to_all_single",
        function=all_to_all_single,
        check=check_all_to_all,
        world_sizes=(4, 3),
        point_to_point=True,
    ),
    Exercise(
        name="naive_allreduce",
        function=naive_allreduce,
        check=check_naive_allreduce,
        world_sizes=(4, 3),
        point_to_point=True,
    ),
]
