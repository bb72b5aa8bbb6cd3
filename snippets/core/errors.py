"""The two ways a run ends badly, and how the command line tells them apart.

A :class:`UsageError` is the person at the keyboard's mistake: one line, exit status 2.
A :class:`RankError` is the program's: a rank raised, timed out or died; exit status 1
with that rank's traceback.
"""

from __future__ import annotations


class UsageError(Exception):
    """Bad input from the person at the keyboard: one line, exit status 2."""


class RankError(RuntimeError):
    """A rank raised, timed out or died. ``str()`` names the rank and the cause."""

    def __init__(
        self,
        rank: int,
        cause: str,
        remote_traceback: str = "",
        usage: str | None = None,
        at_rendezvous: bool = False,
    ):
        super().__init__(f"rank {rank} failed: {cause}")
        self.rank, self.cause, self.remote_traceback = rank, cause, remote_traceback
        self.usage = usage  # the message, when the rank refused bad input (UsageError)
        self.at_rendezvous = at_rendezvous  # it failed joining the group, before fn
        self.stacks: dict[int, str] = {}  # other ranks' Python stacks when it stopped
