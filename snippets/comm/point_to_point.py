"""Point-to-point: send/recv, isend/irecv and wait, batch_isend_irecv, a deadlock on
purpose, and what happens if you touch a buffer before ``wait()``.

Ranks pair up (0↔1, 2↔3, …) and swap a tensor three ways that work, then once the
way that does not: both call the blocking ``send`` first. gloo's ``send`` returns only
once the receiver has posted a matching ``recv`` (even for a 4-byte message), so both
ranks wait for each other forever. Here that exchange runs in a process group of its
own with a short timeout, so it fails after ``--deadlock-timeout`` seconds and the
demo explains what happened instead of hanging.

    python -m snippets run point_to_point
    torchrun --nproc-per-node 2 -m snippets run point_to_point
"""

from __future__ import annotations

import argparse
import datetime
import time

import torch
import torch.distributed as dist

from snippets.comm.messages import note_send
from snippets.comm.swap_frames import one_line, record_stopped, record_swap
from snippets.core import parts
from snippets.core.claims import law
from snippets.core.cli import main_entry, positive_float
from snippets.core.runtime import Spec, device, print0, start_apart

THIS = "snippets.comm.point_to_point"  # its name even when run as __main__
SPEC = Spec(
    timed=True,  # it measures time: run-all runs it alone
    summary="send/recv, isend/irecv, batch_isend_irecv, a deadlock caught by a "
    "timeout, buffer reuse",
    world_size=2,
    min_world_size=2,
)


# --8<-- [start:blocking]
def swap_by_parity(mine: torch.Tensor, theirs: torch.Tensor, peer: int) -> None:
    """Blocking send/recv can't both go first: the even rank sends, then receives;
    the odd rank receives, then sends."""
    if dist.get_rank() % 2 == 0:
        dist.send(mine, peer)
        dist.recv(theirs, peer)
    else:
        dist.recv(theirs, peer)
        dist.send(mine, peer)


# --8<-- [end:blocking]


# --8<-- [start:nonblocking]
def swap_nonblocking(
    mine: torch.Tensor, theirs: torch.Tensor, peer: int, trace: list | None = None
) -> None:
    """isend/irecv return at once with a Work handle; the order no longer matters.
    Until wait() returns, `mine` may still be read and `theirs` may still be written."""
    r, size = dist.get_rank(), mine.numel() * mine.element_size()
    note_send(trace, 0, peer, r, r + 1, size, "isend")  # slot r: rank r's tensor
    works = [dist.isend(mine, peer), dist.irecv(theirs, peer)]
    for w in works:
        w.wait()


def swap_batched(mine: torch.Tensor, theirs: torch.Tensor, peer: int) -> None:
    """batch_isend_irecv posts a list of operations together (NCCL: one launch)."""
    ops = [dist.P2POp(dist.isend, mine, peer), dist.P2POp(dist.irecv, theirs, peer)]
    for w in dist.batch_isend_irecv(ops):
        w.wait()


# --8<-- [end:nonblocking]


# --8<-- [start:deadlock]
def both_send_first(
    mine: torch.Tensor,
    theirs: torch.Tensor,
    peer: int,
    group: dist.ProcessGroup,
    trace: list | None = None,
) -> None:
    """Wrong on purpose: each rank's send waits for a recv the other never reaches."""
    r, size = dist.get_rank(), mine.numel() * mine.element_size()
    note_send(trace, 0, peer, r, r + 1, size, "send")  # noted before it blocks
    dist.send(mine, peer, group=group)
    dist.recv(theirs, peer, group=group)


def deadlock_demo(
    peer: int, timeout_s: float, trace: list | None = None
) -> tuple[float, str]:
    """Run both_send_first in a group of its own whose timeout is ``timeout_s``;
    return how long it took to fail and the backend's error ('' if it did not block,
    as on a backend that buffers small sends: the run then says so)."""
    short = dist.new_group(
        list(range(dist.get_world_size())),
        timeout=datetime.timedelta(seconds=timeout_s),
    )
    if peer >= dist.get_world_size():  # the odd rank out only helped make the group
        return 0.0, ""
    mine, theirs = torch.ones(1, device=device()), torch.empty(1, device=device())
    start = time.perf_counter()
    try:
        both_send_first(mine, theirs, peer, short, trace)
    except RuntimeError as exc:
        return time.perf_counter() - start, str(exc).splitlines()[0]
    return time.perf_counter() - start, ""


# --8<-- [end:deadlock]


# --8<-- [start:hazard]
def write_before_wait(peer: int) -> list[float]:
    """Rank 0 starts an isend of ones, then overwrites the buffer with twos before
    wait(); rank 1 posts its recv a little later. Returns what rank 1 got (0: [])."""
    buf = torch.ones(4, device=device())
    if dist.get_rank() % 2 == 0:
        work = dist.isend(buf, peer)
        buf.fill_(2.0)  # the bug: the send may not have read buf yet
        work.wait()
        return []
    time.sleep(0.2)  # the receiver is late, as it often is
    got = torch.empty(4, device=device())
    dist.recv(got, peer)
    return got.tolist()


# --8<-- [end:hazard]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--deadlock-timeout",
        type=positive_float,
        default=3.0,
        metavar="S",
        help="seconds the deliberate deadlock waits before its group times out "
        "(default 3)",
    )


def main(deadlock_timeout: float = 3.0) -> dict:
    p, me, dev = dist.get_world_size(), dist.get_rank(), device()
    peer = me ^ 1  # pairs 0↔1, 2↔3, …; with an odd p the last rank sits the swaps out
    paired = peer < p
    # the same deadlock launched on its own ranks, meanwhile: how the runtime stops it
    if me == 0:
        exchange = (THIS + ":both_send_first", deadlock_timeout)
        started = start_apart(record_stopped, exchange, deadlock_timeout + 120)
    rows = []
    for name, swap in (
        ("send/recv, ordered by parity", swap_by_parity),
        ("isend/irecv + wait", swap_nonblocking),
        ("batch_isend_irecv", swap_batched),
    ):
        if paired:
            mine = torch.arange(5.0, device=dev) + 10 * me  # (5,) what I send
            theirs = torch.empty(5, device=dev)
            swap(mine, theirs, peer)
            expected = torch.arange(5.0, device=dev) + 10 * peer  # what peer sent
            law(
                torch.equal(theirs, expected),
                f"{name}: got {theirs.tolist()}, expected {expected.tolist()}",
            )
        rows.append({"exchange": name, "result": "both got the other's tensor ✓"})

    seconds, error = deadlock_demo(peer, deadlock_timeout)
    fixed = record_swap(swap_nonblocking, peer)  # the fix as frames, checked inside
    got = write_before_wait(peer) if paired else []
    everyone: list = [None] * p
    dist.all_gather_object(everyone, {"seconds": seconds, "error": error, "got": got})
    received = everyone[1]["got"]
    blocked = all(e["error"] for e in everyone[:2])
    rows.append(
        {
            "exchange": "send first on both ranks",
            "result": f"deadlock until the {deadlock_timeout:g} s timeout"
            if blocked
            else "no deadlock: this backend buffered the small sends",
        }
    )
    changed = received != [1.0] * 4
    rows.append(
        {
            "exchange": "isend, then overwrite the buffer before wait()",
            "result": f"receiver got {received}: "
            + ("the overwrite was sent" if changed else "the original"),
        }
    )

    print0(f"{p} ranks, paired 0↔1 …")
    for row in rows[:3]:
        print0(f"  {row['exchange']:<30} {row['result']}")
    print0(f"  both call send first, 4 bytes, group timeout {deadlock_timeout:g} s:")
    for r in (0, 1):
        e = everyone[r]
        why = one_line(e["error"], 56) if e["error"] else "returned"
        print0(f"    rank {r} after {e['seconds']:.1f} s: {why}")
    if blocked:
        print0("    gloo's send returns only when the peer has posted its recv,")
        print0("    and neither rank got that far.")
    else:
        print0("    neither blocked: the sends were buffered (don't rely on it).")
    print0(f"  isend(ones), fill_(2) before wait(): the receiver got {received}")
    if changed:
        print0("    gloo reads the buffer when the receiver is ready, not at isend:")
        print0("    touching it before wait() changed what was sent.")
    else:
        print0("    this time the data left before the write; still: wait() first.")
    stuck = started() if me == 0 else {}
    if me == 0:
        after = max(stuck["after_s"])
        print0(f"  the same exchange launched alone, stopped after {after:.1f} s:")
        print0(f"    {one_line(stuck['error'], 84)}")
    return {
        "tables": {"exchanges": rows},
        "parts": {  # rank 0's are kept: its deadlock trace
            "deadlock": parts.player(stuck),
            "swap": parts.player(fixed),
        },
        "deadlocked": blocked,
        "deadlock_seconds": [e["seconds"] for e in everyone[:2]],
        "write_before_wait_received": received,
    }


if __name__ == "__main__":
    raise SystemExit(main_entry(main, SPEC))
