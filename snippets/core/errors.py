"""The two ways a run ends badly, and how the command line tells them apart.

A :class:`UsageError` is the person at the keyboard's mistake: one line, exit status 2.
A :class:`RankError` is the program's: a rank raised, timed out or died; exit status 1
with that rank's traceback.

A RankError carries what the command line prints, so a notebook or a test that calls
``launch`` sees it too: like ``concurrent.futures``' process pool, the failing rank's
traceback is its ``__cause__`` (Python prints it above the launcher's own), and the
message adds, after its first line, why in plain words where the launcher knows (a
rank that returned while another waited in a collective) and where every other rank
was.
"""

from __future__ import annotations


class UsageError(Exception):
    """Bad input from the person at the keyboard: one line, exit status 2."""


class RemoteTraceback(Exception):
    """A rank's traceback, as the text it formatted in its own process."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text

    def __str__(self) -> str:  # concurrent.futures' layout: the text as a block
        return f'\n"""\n{self.text.rstrip()}\n"""'


class RankError(RuntimeError):
    """A rank raised, timed out or died. The first line of ``str()`` names the rank and
    the cause; the lines after it say why (``reason``) and where the others were
    (``stacks``), as given when it was made."""

    def __init__(
        self,
        rank: int,
        cause: str,
        remote_traceback: str = "",
        usage: str | None = None,
        at_rendezvous: bool = False,
        *,
        reason: str = "",
        stacks: dict[int, str] | None = None,
    ):
        self.rank, self.cause, self.remote_traceback = rank, cause, remote_traceback
        self.usage = usage  # the message, when the rank refused bad input (UsageError)
        self.at_rendezvous = at_rendezvous  # it failed joining the group, before fn
        self.reason = reason  # e.g. "rank 1 returned while rank 0 was still in …"
        self.stacks: dict[int, str] = dict(stacks or {})  # the others', when it failed
        lines = [f"rank {rank} failed: {cause}"] + ([reason] if reason else [])
        for other, stack in sorted(self.stacks.items()):
            lines.append(f"[rank {other}] where it was when rank {rank} failed:")
            lines += [f"[rank {other}] {line}" for line in stack.rstrip().splitlines()]
        super().__init__("\n".join(lines))
        if remote_traceback:  # raised or not, it carries the rank's own traceback
            self.__cause__ = RemoteTraceback(remote_traceback)
