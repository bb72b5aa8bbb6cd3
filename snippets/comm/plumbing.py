"""Plumbing shared by the hand-made collectives and all-reduces: the one elementwise
reduction, the trace of who sent what to whom, the cross-rank input check, and flat views.

Everything here moves data only with ``dist.isend``/``dist.irecv``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch.distributed import ReduceOp

from snippets.core.runtime import device

OPS = {
    "SUM": ReduceOp.SUM,
    "PRODUCT": ReduceOp.PRODUCT,
    "MIN": ReduceOp.MIN,
    "MAX": ReduceOp.MAX,
    "AVG": ReduceOp.AVG,
}
DTYPES = (
    torch.float16,
    torch.bfloat16,
    torch.float32,
    torch.float64,
    torch.int32,
    torch.int64,
)


# --8<-- [start:reduce_op]
def op_name(op: object) -> str | None:
    return next((name for name, known in OPS.items() if op == known), None)


def combine_(acc: torch.Tensor, other: torch.Tensor, op: ReduceOp) -> None:
    """acc ← acc ⊕ other, elementwise and in place: the one reduction every algorithm uses.
    AVG adds here and divides once at the end (``finish_``), as gloo and NCCL do."""
    if op == ReduceOp.SUM or op == ReduceOp.AVG:
        acc.add_(other)
    elif op == ReduceOp.PRODUCT:
        acc.mul_(other)
    elif op == ReduceOp.MIN:
        torch.minimum(acc, other, out=acc)
    elif op == ReduceOp.MAX:
        torch.maximum(acc, other, out=acc)
    else:
        raise ValueError(
            f"unsupported reduce op {op}: use SUM, PRODUCT, MIN, MAX or AVG"
        )


def finish_(t: torch.Tensor, op: ReduceOp, p: int) -> None:
    if op == ReduceOp.AVG:
        t.div_(p)


def op_problem(t: torch.Tensor, op: object) -> str:
    """Why (op, dtype) can't be reduced, or '' if it can."""
    if op_name(op) is None:
        return f"unsupported reduce op {op}: use SUM, PRODUCT, MIN, MAX or AVG"
    if t.dtype not in DTYPES:
        return f"unsupported dtype {t.dtype}: use a float or int32/int64 tensor"
    if op == ReduceOp.AVG and not t.dtype.is_floating_point:
        return f"ReduceOp.AVG needs a floating-point tensor, got {t.dtype} (torch refuses it too)"
    return ""


# --8<-- [end:reduce_op]


# --8<-- [start:trace]
@dataclass(frozen=True)
class Send:
    """One message of a schedule: at ``step``, global rank ``src`` sends elements
    [start, stop) of the flat tensor (``nbytes`` bytes) to global rank ``dst``."""

    step: int
    src: int
    dst: int
    start: int
    stop: int
    nbytes: int
    phase: str = ""


def send(
    flat: torch.Tensor,
    start: int,
    stop: int,
    dst: int,
    group: dist.ProcessGroup | None,
    trace: list | None = None,
    step: int = 0,
    phase: str = "",
    tag: int = 0,
) -> dist.Work | None:
    """isend ``flat[start:stop]`` to global rank ``dst``, noting it in ``trace`` if given.
    An empty range sends nothing (the receiver knows the same bounds and skips too)."""
    if stop <= start:
        return None
    if trace is not None:
        trace.append(
            Send(
                step,
                dist.get_rank(),
                dst,
                start,
                stop,
                (stop - start) * flat.element_size(),
                phase,
            )
        )
    return dist.isend(flat[start:stop], dst, group=group, tag=tag)


def recv(
    buf: torch.Tensor, src: int, group: dist.ProcessGroup | None, tag: int = 0
) -> dist.Work | None:
    return dist.irecv(buf, src, group=group, tag=tag) if buf.numel() else None


def exchange(
    flat: torch.Tensor,
    start: int,
    stop: int,
    dst: int,
    into: torch.Tensor,
    src: int,
    group: dist.ProcessGroup | None,
    trace: list | None = None,
    step: int = 0,
    phase: str = "",
) -> list:
    """Send flat[start:stop] to ``dst`` and receive ``into`` from ``src``, posted together with
    ``batch_isend_irecv``: when dst == src, NCCL needs the pair in one group or both ranks'
    sends wait for receives queued behind them. (gloo posts them one by one.)"""
    ops = []
    if stop > start:
        if trace is not None:
            trace.append(
                Send(
                    step,
                    dist.get_rank(),
                    dst,
                    start,
                    stop,
                    (stop - start) * flat.element_size(),
                    phase,
                )
            )
        ops.append(dist.P2POp(dist.isend, flat[start:stop], dst, group))
    if into.numel():
        ops.append(dist.P2POp(dist.irecv, into, src, group))
    return dist.batch_isend_irecv(ops) if ops else []


def wait_all(works: list) -> None:
    for w in works:
        if w is not None:
            w.wait()


# --8<-- [end:trace]


# --8<-- [start:agree]
def group_ranks(group: dist.ProcessGroup | None) -> tuple[list[int], int]:
    """(global ranks of the group in group order, my index among them)."""
    ranks = dist.get_process_group_ranks(group or dist.group.WORLD)
    me = dist.get_rank(group)
    if me < 0:
        raise ValueError(
            f"rank {dist.get_rank()} is not a member of this group (ranks {ranks})"
        )
    return ranks, me


def agree(
    fields: list[int], problem: str, group: dist.ProcessGroup | None
) -> list[list[int]]:
    """Every rank learns every rank's ``fields`` (the same number of ints on every rank) and
    raises the same ValueError if any rank reported a ``problem``: one round of tiny messages."""
    ranks, me = group_ranks(group)
    text = list(problem.encode()[:160].ljust(160))
    mine = torch.tensor(
        [len(fields), *fields, *text], dtype=torch.int64, device=device()
    )
    theirs = [mine if j == me else torch.empty_like(mine) for j in range(len(ranks))]
    works = [dist.isend(mine, r, group=group) for j, r in enumerate(ranks) if j != me]
    works += [
        dist.irecv(theirs[j], r, group=group) for j, r in enumerate(ranks) if j != me
    ]
    wait_all(works)
    rows = [t.tolist() for t in theirs]
    for j, row in enumerate(rows):
        reported = bytes(row[1 + row[0] :]).decode(errors="replace").strip()
        if reported:
            raise ValueError(f"rank {ranks[j]}: {reported}")
    return [row[1 : 1 + row[0]] for row in rows]


def agree_on_size(
    t: torch.Tensor, group: dist.ProcessGroup | None, what: str, problem: str = ""
) -> None:
    """Raise on every rank if any rank found a ``problem`` or the tensors' numel/dtype differ."""
    seen = agree(
        [t.numel(), DTYPES.index(t.dtype) if t.dtype in DTYPES else -1], problem, group
    )
    if len({tuple(row) for row in seen}) > 1:
        raise ValueError(
            f"{what}: tensors differ across ranks (numel, dtype code per rank: {seen}); "
            "every rank must pass the same size and dtype"
        )


# --8<-- [end:agree]


# --8<-- [start:flat]
def bounds(n: int, parts: int) -> list[int]:
    """Offsets splitting n elements into ``parts`` near-equal chunks: chunk c is
    [bounds[c], bounds[c+1]); the first n % parts chunks get one element more."""
    q, r = divmod(n, parts)
    return [c * q + min(c, r) for c in range(parts + 1)]


def begin(
    tensor: torch.Tensor,
    op: ReduceOp,
    group: dist.ProcessGroup | None,
    what: str,
    check: bool = True,
) -> tuple[torch.Tensor, list[int], int]:
    """Check the input (on every rank, see ``agree``) and return (flat view, global ranks, my index).
    A non-contiguous tensor is reduced in a contiguous copy that ``end`` writes back."""
    ranks, me = group_ranks(group)
    problem = op_problem(tensor, op)
    if check and len(ranks) > 1:
        agree_on_size(tensor, group, what, problem)
    elif problem:
        raise ValueError(problem)
    return (
        (tensor.view(-1) if tensor.is_contiguous() else tensor.contiguous().view(-1)),
        ranks,
        me,
    )


def end(tensor: torch.Tensor, flat: torch.Tensor, op: ReduceOp, p: int) -> None:
    finish_(flat, op, p)
    if flat.data_ptr() != tensor.data_ptr() or not tensor.is_contiguous():
        tensor.copy_(flat.view_as(tensor))


# --8<-- [end:flat]
