"""Which rank's failure to report: the cause, not its echo; and, where one rank
returned while another waited, that in plain words.

When one rank fails, its peers fail too, a moment later, because the connections it
held close: gloo reports "Connection closed by peer" on every rank that was waiting
for it. Usually the cause reaches the launcher first. But a rank that times out inside
a collective can close its connections before its own report is on the queue, so the
echo can arrive first. The launcher then waits a moment longer for a report that is
not an echo, and names that rank instead.

The commonest cause has no error of its own: one rank made one collective fewer, so it
returned and left the group while its peer still waited in that collective. The peer's
echo is then all there is, and :func:`returned_while` says what happened and on which
of the reader's lines the peer waited.
"""

from __future__ import annotations

import os
import queue
import re
import time
from typing import Any

import torch
import torch.distributed as dist

# --8<-- [start:cause]
# What a rank says when a peer's connection to it went away (gloo's wording, and the
# operating system's for a socket written after its far end closed).
ECHOES = ("Connection closed by peer", "Connection reset by peer", "Broken pipe")


def is_echo(line: str) -> bool:
    return any(echo.lower() in line.lower() for echo in ECHOES)


def first_cause(
    results: Any, rank: int, payload: tuple, wait_s: float = 0.5
) -> tuple[int, tuple]:
    """(rank, payload) of the failure to report, given the first error off the queue:
    that one unless it is an echo and a rank with a real cause reports within
    ``wait_s``. ``payload`` is (one line, traceback, usage, at rendezvous), as a rank
    reports it."""
    deadline = time.monotonic() + wait_s
    while is_echo(payload[0]):
        left = deadline - time.monotonic()
        if left <= 0:
            break
        try:
            other, status, other_payload = results.get(timeout=left)
        except queue.Empty:
            break
        if status == "error" and not is_echo(other_payload[0]):
            return other, other_payload
    return rank, payload


# --8<-- [end:cause]

FRAME = re.compile(r'^  File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<fn>\S+)$')
TORCH = os.path.dirname(os.path.abspath(torch.__file__)) + os.sep
LAUNCHER = {  # the project's frames around a rank's function: not the reader's lines
    os.path.join(os.path.dirname(os.path.abspath(__file__)), name)
    for name in ("ranks.py", "runtime.py")
}


def waited_in(traceback: str) -> tuple[str, str, int] | None:
    """(collective, file, line) where a rank waited when it failed, read from its
    traceback: the innermost frame outside torch and the launcher (the reader's line),
    if torch frames lie below it; the collective is the first function below that
    ``torch.distributed`` exports (past wrappers such as c10d's logger), else the
    first below it. None if the rank failed in its own code."""
    last = traceback.rsplit("Traceback (most recent call last):", 1)[-1]  # if chained
    frames = [
        (m["file"], int(m["line"]), m["fn"])
        for m in map(FRAME.match, last.splitlines())
        if m
    ]
    ours = [
        i
        for i, (file, _, _) in enumerate(frames)
        if not os.path.abspath(file).startswith(TORCH)
        and os.path.abspath(file) not in LAUNCHER
    ]
    if not ours or ours[-1] == len(frames) - 1:
        return None
    file, line, _ = frames[ours[-1]]
    below = [fn for _, _, fn in frames[ours[-1] + 1 :]]
    name = next((fn for fn in below if callable(getattr(dist, fn, None))), below[0])
    return name, file, line


def returned_while(returned: list[int], rank: int, traceback: str) -> str:
    """The plain sentence for ``returned`` ranks that finished their function while
    ``rank`` waited in torch: "rank 1 returned while rank 0 was still in all_reduce at
    FILE:LINE"; empty where nobody returned or ``rank`` failed in its own code."""
    where = waited_in(traceback)
    if not returned or where is None:
        return ""
    who = "ranks " if len(returned) > 1 else "rank "
    name, file, line = where
    return (
        f"{who}{', '.join(map(str, returned))} returned while rank {rank} was still "
        f"in {name} at {file}:{line}"
    )
