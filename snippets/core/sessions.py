"""torchrun in process sessions of its own: started with a deadline, stopped however it
ends, and what it left behind found and killed.

Each launcher starts with ``start_new_session``, so its session and process group hold
it and whatever it starts without a session of its own. SIGTERM to that group is the
polite stop: torchrun passes it on to its ranks and exits. SIGKILL to the group, after
a grace period, is the other one. Neither reaches every rank: torchrun starts each
rank in a session of its own, and a rank whose launcher was killed outright is given
to init, out of reach of any walk down the process tree. What a rank keeps is its
environment. Every process a run starts carries ``COMMONPLACE_RUN=<the run's id>``;
once the launchers are gone, whatever still carries it was left behind, and is killed
by its pid.

Reading another process's environment takes ``/proc`` (Linux). Where there is none
(macOS), no process is found: the sessions are still stopped, but what escaped them
is not seen.

    ended = run_sessions({"node0": torchrun_command("--standalone", "-m", "pkg")},
                         {"node0": Path("node0.log")}, timeout_s=60)
    ended.returncodes, ended.stopped, ended.left   # how each ended; what was left
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Hashable
from dataclasses import dataclass
from pathlib import Path

from snippets.core.import_graph import REPO_DIR
from snippets.core.runtime import RANK_VARIABLES

MARK = "COMMONPLACE_RUN"  # in the environment of every process a run starts: its id
PROC = Path("/proc")  # where Linux shows each process's state and environment


def torchrun_command(*args: str) -> list[str]:
    """``torchrun ARGS`` run by this interpreter, not whichever ``torchrun`` comes
    first on PATH."""
    return [sys.executable, "-m", "torch.distributed.run", *args]


@dataclass
class Ended:
    """What became of commands run together, each in a session of its own, by the
    keys the caller gave them."""

    pids: dict[Hashable, int]
    returncodes: dict[Hashable, int]  # exit status; negative: ended by that signal
    failed: Hashable | None  # the first that exited with a status other than 0
    stopped: list  # still running when one failed or the deadline passed
    left: list[int]  # marked processes alive once the commands were gone
    left_at_end: list[int]  # marked processes alive after the sweep: must be none


def run_sessions(
    commands: dict[Hashable, list[str]],
    logs: dict[Hashable, Path],
    timeout_s: float,
    *,
    env: dict[str, str] | None = None,
    mark: str | None = None,
    grace_s: float = 10.0,
) -> Ended:
    """Start each command, in order, from the repository in a session of its own, its
    output in its log; wait until all have exited, one has failed or ``timeout_s`` has
    passed; stop what still runs, then find and kill what carries the run's ``mark``.
    The environment is this one without the rank variables (a launcher sets its own),
    with the repository on PYTHONPATH, the mark, and ``env``."""
    mark = mark or uuid.uuid4().hex[:12]
    environment = {k: v for k, v in os.environ.items() if k not in RANK_VARIABLES}
    environment |= {"PYTHONPATH": str(REPO_DIR), MARK: mark, **(env or {})}
    procs: dict[Hashable, subprocess.Popen] = {}
    failed = None
    with contextlib.ExitStack() as files:
        try:
            for key, argv in commands.items():
                log = files.enter_context(open(logs[key], "wb"))
                procs[key] = subprocess.Popen(argv, cwd=REPO_DIR, env=environment,
                                              stdout=log, stderr=subprocess.STDOUT,
                                              start_new_session=True)  # fmt: skip
            failed = wait_all(procs, deadline=time.monotonic() + timeout_s)
        finally:  # every way out, an exception or ^C included
            stopped = stop(procs, grace_s)
            left = left_behind(mark)
            left_at_end = sweep(mark)
    pids = {key: p.pid for key, p in procs.items()}
    codes = {key: p.returncode for key, p in procs.items()}
    return Ended(pids, codes, failed, stopped, left, left_at_end)


def wait_all(
    procs: dict[Hashable, subprocess.Popen], deadline: float
) -> Hashable | None:
    """Wait until every command has exited, one has failed, or the deadline has
    passed: whatever still runs then is to be stopped. The first that failed (its
    key), if one did, else None."""
    while time.monotonic() < deadline:
        codes = {key: p.poll() for key, p in procs.items()}
        failed = [key for key, c in codes.items() if c not in (None, 0)]
        if failed or None not in codes.values():
            return failed[0] if failed else None
        time.sleep(0.1)
    return None


# --8<-- [start:stop]
def stop(procs: dict[Hashable, subprocess.Popen], grace_s: float = 10.0) -> list:
    """SIGTERM the process group of each command still running (torchrun passes it on
    to its ranks, then exits); SIGKILL what is left of a group after ``grace_s``. The
    keys of those stopped."""
    running = [key for key, p in procs.items() if p.poll() is None]
    for key in running:
        signal_group(procs[key], signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    for key in running:
        if not group_gone(procs[key], until=deadline):
            signal_group(procs[key], signal.SIGKILL)  # what ignored SIGTERM
            group_gone(procs[key], until=time.monotonic() + 5.0)  # a moment to die
        procs[key].wait()
    return running


def left_behind(mark: str) -> list[int]:
    """Live processes whose environment carries the run's mark: started by its
    commands or by what they started, in any session. Other users' processes are
    unreadable and skipped; without /proc none are found."""
    needle = f"{MARK}={mark}".encode()
    found = []
    for environ in PROC.glob("[0-9]*/environ"):
        try:
            state = (environ.parent / "stat").read_text().rsplit(")", 1)[1].split()[0]
            if state != "Z" and needle in environ.read_bytes().split(b"\0"):
                found.append(int(environ.parent.name))
        except (OSError, IndexError):
            continue  # gone since the listing, or not ours to read
    return [pid for pid in found if pid != os.getpid()]


def sweep(mark: str, wait_s: float = 5.0) -> list[int]:
    """SIGKILL every process that carries the mark, by its id; the ones still alive
    after ``wait_s`` (none, unless a process cannot be killed)."""
    for pid in left_behind(mark):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + wait_s
    while (left := left_behind(mark)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left


# --8<-- [end:stop]


def signal_group(proc: subprocess.Popen, signum: int) -> bool:
    """Send ``signum`` to the process group ``proc`` leads (signal 0: none, only the
    check); False if no process of it is left. The leader is reaped first if it has
    exited, so that a group of one zombie counts as gone (the group's id cannot be
    another's while a member lives)."""
    proc.poll()
    try:
        os.killpg(proc.pid, signum)
    except ProcessLookupError:
        return False
    return True


def group_gone(proc: subprocess.Popen, until: float) -> bool:
    """Wait until no process of the group ``proc`` leads is left, or ``until``."""
    while signal_group(proc, 0):
        if time.monotonic() >= until:
            return False
        time.sleep(0.05)
    return True
