"""A lab of broken programs: each one hangs, and the run says where every rank was.

Each program runs on two gloo ranks through :func:`snippets.core.runtime.launch` with a
2 s group timeout. The launcher stops every rank when one fails, names that rank and
its cause, and asks every other rank for its Python stack at that moment. Here each
stack is cut down to the line of this file it was on, and checked against the line
the program marks as broken (``# BROKEN``): the failing rank's line from its own
traceback, the others' from their stacks.

The stacks come from ``faulthandler``, registered on SIGUSR1 in every rank: it is in
the standard library, runs inside the rank, and writes from C, so it answers while the
rank waits inside a collective. ``py-spy`` (on PyPI) can read a stuck process from the
outside, but it needs ptrace, which containers often deny.

Two diagnostics beside the stacks: ``dist.monitored_barrier(timeout=…)`` on rank 0
names the rank that did not arrive; ``TORCH_DISTRIBUTED_DEBUG=DETAIL`` wraps a gloo
group in one that compares each collective's fingerprint (op, shapes, dtypes) across
ranks before running it. The level is read when torch is imported, and the ranks are
forked from a server that imported it earlier, so a program reads it again
(``dist.set_debug_level_from_env``) and makes a new group, which DETAIL wraps.

A rank that got past the program (it finished its part, or its wait was cut short) is
asked in the launcher's own code; its place is then written as that. A rank that failed
too sends its own traceback, which names the line it waited on.
"""

from __future__ import annotations

import datetime
import os
import re
import time
from pathlib import Path

import torch
import torch.distributed as dist

from snippets.core.claims import LawBroken, law
from snippets.core.runtime import RankError, Spec, launch

SPEC = Spec(summary="five broken programs, where each rank was when the run stopped")

TIMEOUT_S = 2.0
LATE_S = 1.0  # rank 1 reaches its wait this much later, so rank 0's runs out first


# --8<-- [start:extra]
def one_more_all_reduce() -> None:
    x = torch.ones(1)
    steps = 3 if dist.get_rank() == 0 else 2
    for _ in range(steps):
        dist.all_reduce(x)  # BROKEN extra 0
    time.sleep(LATE_S)
    dist.barrier()  # BROKEN extra 1


# --8<-- [end:extra]


# --8<-- [start:shapes]
def different_shapes() -> None:
    x = torch.ones(2 + dist.get_rank())  # rank 0: [2], rank 1: [3]
    dist.all_reduce(x)  # BROKEN shapes


def different_shapes_detail() -> None:
    dist.set_debug_level_from_env()  # DETAIL, set before launch, read again here
    group = dist.new_group(backend="gloo")  # a new group: DETAIL wraps it
    x = torch.ones(2 + dist.get_rank())
    dist.all_reduce(x, group=group)  # BROKEN detail


# --8<-- [end:shapes]


# --8<-- [start:barrier]
def skipped_barrier(monitored: bool = False) -> None:
    if dist.get_rank() != 1:  # rank 1 skips it
        if monitored:
            dist.monitored_barrier(timeout=datetime.timedelta(seconds=1))  # BROKEN mon
        else:
            dist.barrier()  # BROKEN barrier 0
    time.sleep(LATE_S)
    dist.all_reduce(torch.ones(1))  # BROKEN barrier 1


# --8<-- [end:barrier]


# --8<-- [start:unmatched]
def send_without_recv() -> None:
    x = torch.ones(1)
    if dist.get_rank() == 0:
        dist.send(x, dst=1)  # BROKEN unmatched 0
        dist.recv(x, src=1)  # BROKEN unmatched 0b
    else:  # forgets its recv and its reply, and goes on to a barrier
        time.sleep(LATE_S)
        dist.barrier()  # BROKEN unmatched 1


# --8<-- [end:unmatched]


# --8<-- [start:crossed]
def crossed() -> None:
    x = torch.ones(1)
    peer = 1 - dist.get_rank()
    if dist.get_rank() == 1:
        time.sleep(LATE_S)
    dist.recv(x, src=peer)  # BROKEN crossed: both ranks receive first
    dist.send(x, dst=peer)


# --8<-- [end:crossed]


def marked_lines(path: Path = Path(__file__)) -> dict[str, int]:
    """{label: line} of every ``# BROKEN label`` comment in ``path``."""
    found = {}
    for number, text in enumerate(path.read_text().splitlines(), 1):
        if m := re.search(r"# BROKEN (\w+(?: \w+)?)", text):
            found[m[1]] = number
    return found


def where(text: str) -> tuple[int, str] | None:
    """(line, function) of the innermost frame of this file in a stack or traceback:
    faulthandler writes ``File "…", line N in f``, traceback ``…, line N, in f``."""
    name = re.escape(Path(__file__).name)
    frames = re.findall(rf'File "[^"]*{name}", line (\d+),? in (\w+)', text)
    if not frames:
        return None
    # faulthandler lists the innermost call first, a traceback lists it last
    line, fn = frames[-1] if "Traceback" in text else frames[0]
    return int(line), fn


def one_line(cause: str, width: int = 100) -> str:
    """A cause without gloo's ``[file.cc:123]`` prefix, cut to ``width`` columns."""
    text = re.sub(r"\[[^\]]*\.(cc|cpp|h):\d+\]\s*", "", cause.splitlines()[0])
    return text if len(text) <= width else text[: width - 1] + "…"


def run(program, args: tuple = (), detail: bool = False) -> RankError:
    """Launch ``program`` on two gloo ranks and return the RankError that stops it."""
    saved = os.environ.get("TORCH_DISTRIBUTED_DEBUG")
    if detail:
        os.environ["TORCH_DISTRIBUTED_DEBUG"] = "DETAIL"
    try:
        launch(program, 2, backend="gloo", timeout_s=TIMEOUT_S, args=args)
    except RankError as err:
        return err
    finally:
        if saved is None:
            os.environ.pop("TORCH_DISTRIBUTED_DEBUG", None)
        else:
            os.environ["TORCH_DISTRIBUTED_DEBUG"] = saved
    raise LawBroken(f"{program.__name__} was meant to fail and finished")


def place(found: tuple[int, str] | None) -> str:
    return (
        f"hang_lab.py:{found[0]} {found[1]}"
        if found
        else "past the program, in the launcher"
    )


# (program, function, its arguments, DETAIL on, the rank that fails, {rank: the labels
# of the lines it may be on}). Rank 0 fails where it waits first (rank 1 comes LATE_S
# later); None where both ranks find the fault at once.
LAB = [
    ("rank 0 calls all_reduce once more", one_more_all_reduce, (), False, 0,
     {0: ("extra 0",), 1: ("extra 1",)}),
    ("two shapes in one all_reduce", different_shapes, (), False, None,
     {0: ("shapes",), 1: ("shapes",)}),
    ("two shapes, DETAIL", different_shapes_detail, (), True, None,
     {0: ("detail",), 1: ("detail",)}),
    ("rank 1 skips a barrier", skipped_barrier, (), False, 0,
     {0: ("barrier 0",), 1: ("barrier 1",)}),
    ("rank 1 skips a monitored_barrier", skipped_barrier, (True,), False, 0,
     {0: ("mon",), 1: ("barrier 1",)}),
    ("a send with no recv", send_without_recv, (), False, 0,
     {0: ("unmatched 0", "unmatched 0b"), 1: ("unmatched 1",)}),
    ("src and dst crossed", crossed, (), False, 0,
     {0: ("crossed",), 1: ("crossed",)}),
]  # fmt: skip


def row(name: str, err: RankError, labels: dict, marks: dict[str, int]) -> dict:
    """One line of the table, checked: every line found is one the program marks."""
    places = {err.rank: where(err.remote_traceback)}
    places.update({r: where(stack) for r, stack in err.stacks.items()})
    for rank, found in places.items():
        lines = {marks[label] for label in labels[rank]}
        law(found is None or found[0] in lines, (name, rank, found, lines))
    other = 1 - err.rank
    return {
        "program": name,
        "failing rank": err.rank,
        "cause": one_line(err.cause),
        "it was at": place(places[err.rank]),
        "the other rank was at": place(places.get(other))
        if other in err.stacks
        else "gone: it had left",
    }


def main() -> dict:
    marks = marked_lines()
    rows = []
    for name, program, args, detail, failing, labels in LAB:
        err = run(program, args, detail)
        if failing is not None:
            law(err.rank == failing, (name, err.rank, err.cause))
        rows.append(row(name, err, labels, marks))
    for r in rows:
        print(f"{r['program']}: rank {r['failing rank']} failed: {r['cause']}")
    return {"tables": {"lab": rows}, "provenance": {"backend": "gloo", "world_size": 2}}
