"""Messages: how the hand-made collectives and all-reduces move data, and how they cut
a buffer into the pieces they move.

Every message is an ``isend``/``irecv`` of a view of one flat tensor, so nothing is
copied to be sent. A ``trace=`` list, where a caller passes one, gets a ``Send`` per
message: the schedule as data, which the tests hold against each algorithm's theory.
``bounds`` is the one splitter: p chunks for a ring, q for halving/doubling, two
halves for the double tree, and (through ``segments``) the pipeline's segments.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.distributed as dist


# --8<-- [start:split]
def bounds(n: int, parts: int, start: int = 0) -> list[int]:
    """Offsets cutting [start, start + n) into ``parts`` near-equal pieces: piece c is
    [b[c], b[c+1]), and the first n % parts pieces get one element more."""
    q, r = divmod(n, parts)
    return [start + c * q + min(c, r) for c in range(parts + 1)]


def segments(lo: int, hi: int, most: int) -> list[tuple[int, int]]:
    """[lo, hi) cut by ``bounds`` into the fewest pieces of at most ``most`` elements
    (none if the range is empty): what a pipeline forwards one at a time."""
    if hi <= lo:
        return []
    b = bounds(hi - lo, -(-(hi - lo) // most), lo)
    return list(zip(b, b[1:]))


# --8<-- [end:split]


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


def sent_per_rank(trace: list[Send], world_size: int) -> dict[int, int]:
    """Bytes each rank sent, from a trace merged across ranks."""
    out = {r: 0 for r in range(world_size)}
    for s in trace:
        out[s.src] += s.nbytes
    return out


# --8<-- [end:trace]


def gather_trace(trace: list[Send]) -> list[Send]:
    """Every rank's trace, merged on every rank and sorted by (step, src)."""
    everyone: list = [None] * dist.get_world_size()
    dist.all_gather_object(everyone, trace)
    return sorted((s for t in everyone for s in t), key=lambda s: (s.step, s.src))


def trace_rows(trace: list[Send]) -> list[dict]:
    """A merged trace as table rows, one message a row."""
    return [
        {
            "step": s.step,
            "phase": s.phase,
            "send": f"{s.src} → {s.dst}",
            "elements": f"[{s.start}, {s.stop})",
            "bytes": s.nbytes,
        }
        for s in trace
    ]


def _note(
    trace: list | None,
    flat: torch.Tensor,
    start: int,
    stop: int,
    dst: int,
    step: int,
    phase: str,
) -> None:
    if trace is not None:
        size = (stop - start) * flat.element_size()
        trace.append(Send(step, dist.get_rank(), dst, start, stop, size, phase))


def note_send(
    trace: list | None,
    step: int,
    dst: int,
    start: int,
    stop: int,
    nbytes: int,
    phase: str,
) -> None:
    """Note a message whose data is a whole tensor in ``trace`` (if given): [start,
    stop) then names the pieces it fills in the animation's layout, not elements."""
    if trace is not None:
        trace.append(Send(step, dist.get_rank(), dst, start, stop, nbytes, phase))


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
    """isend ``flat[start:stop]`` to global rank ``dst``, noting it in ``trace``.
    An empty range sends nothing (the receiver knows the same bounds and skips too)."""
    if stop <= start:
        return None
    _note(trace, flat, start, stop, dst, step, phase)
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
    """Send flat[start:stop] to ``dst`` and receive ``into`` from ``src``, posted
    together with ``batch_isend_irecv``: when dst == src, NCCL needs the pair in one
    group, or both ranks' sends wait for receives queued behind them."""
    ops = []
    if stop > start:
        _note(trace, flat, start, stop, dst, step, phase)
        ops.append(dist.P2POp(dist.isend, flat[start:stop], dst, group))
    if into.numel():
        ops.append(dist.P2POp(dist.irecv, into, src, group))
    return dist.batch_isend_irecv(ops) if ops else []


def wait_all(works: list) -> None:
    for w in works:
        if w is not None:
            w.wait()
