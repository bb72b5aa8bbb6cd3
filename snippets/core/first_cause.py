"""Which rank's failure to report: the cause, not its echo.

When one rank fails, its peers fail too, a moment later, because the connections it
held close: gloo reports "Connection closed by peer" on every rank that was waiting
for it. Usually the cause reaches the launcher first. But a rank that times out inside
a collective can close its connections before its own report is on the queue, so the
echo can arrive first. The launcher then waits a moment longer for a report that is
not an echo, and names that rank instead.
"""

from __future__ import annotations

import queue
import time
from typing import Any

# --8<-- [start:cause]
# What a rank says when a peer's connection to it went away (gloo's wording, and the
# operating system's for a socket written after its far end closed).
ECHOES = ("Connection closed by peer", "Connection reset by peer", "Broken pipe")


def is_echo(line: str) -> bool:
    return any(echo in line for echo in ECHOES)


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
