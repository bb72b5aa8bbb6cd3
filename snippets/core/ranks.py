"""Local ranks: join a process group, spawn N of them, watch them, stop them all.

:func:`snippets.core.runtime.launch` uses this when it starts the ranks itself (no
``torchrun``). Each rank is forked from a small server process that imported torch once
and has touched neither CUDA nor threads (``forkserver``), so a launch costs
milliseconds, not an interpreter start per rank. The rank then takes the launcher's
current environment, working folder and output streams, as a fresh interpreter would.
Ranks meet through a ``FileStore`` in a private temporary folder, so two runs at once
never collide. The parent waits for the ranks' reports: the first rank to report a
failure, or to die without a word, stops every other rank at once, and the parent raises
:class:`~snippets.core.errors.RankError` naming that rank and its cause, carrying its
traceback and saying where every other rank was.

A rank's last words outlive it: its report is a file in the private folder, whole
before the rank rings the launcher (the queue carries only its number) and before it
exits. So "did this rank report?" has one answer however late the launcher looks, and a
rank is said to have died without a word only if it exited and left no report.

What crosses a process boundary goes by value. A rank's result is pickled to bytes
in its report (a tensor otherwise travels as a handle its sender must outlive);
what the launcher hands a starting rank (its arguments, its output streams) travels
with the start itself, before the launcher goes on.
"""

from __future__ import annotations

import datetime
import faulthandler
import multiprocessing as mp
import os
import pickle
import queue
import re
import signal
import sys
import tempfile
import threading
import time
import traceback
from typing import Any, Callable, Sequence

import torch
import torch.distributed as dist

from snippets.core.errors import RankError, UsageError
from snippets.core.first_cause import first_cause, is_echo, returned_while


# --8<-- [start:join]
def join_group(
    backend: str, timeout_s: float, rank: int, world_size: int, store_dir: str | None
) -> None:
    timeout = datetime.timedelta(seconds=timeout_s)
    if backend == "nccl":
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", rank)))
    if store_dir is None:  # torchrun set MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE
        dist.init_process_group(backend, timeout=timeout)
    else:  # local ranks: a file in a private folder is the rendezvous; runs never meet
        store = dist.FileStore(os.path.join(store_dir, "rendezvous"), world_size)
        dist.init_process_group(
            backend, store=store, rank=rank, world_size=world_size, timeout=timeout
        )
    if backend == "gloo":
        # No rank leaves before every rank has connected: one with nothing to do
        # would close its sockets on a peer still meeting, and that peer would fail.
        dist.barrier()
        local_ranks = int(os.environ.get("LOCAL_WORLD_SIZE", world_size))
        torch.set_num_threads(thread_share(local_ranks))


def thread_share(processes: int) -> int:
    """Intra-op threads for each of ``processes`` processes that run on this machine's
    cores at once: its share of them, at least one, and never more than
    ``OMP_NUM_THREADS`` asks. With a thread per core each, a process's threads spin
    waiting for a sibling that another process has taken the core from."""
    share = max(1, (os.cpu_count() or 1) // processes)
    asked = os.environ.get("OMP_NUM_THREADS", "").split(",")[0]
    return max(1, min(share, int(asked) if asked.isdigit() else share))


def run_rank(
    fn: Callable,
    args: tuple,
    backend: str,
    timeout_s: float,
    rank: int = 0,
    world_size: int = 1,
    store_dir: str | None = None,
) -> Any:
    join_group(backend, timeout_s, rank, world_size, store_dir)
    try:
        return fn(*args)
    finally:
        dist.destroy_process_group()


# --8<-- [end:join]


def _one_line(exc: BaseException) -> str:
    first = next((line.strip() for line in str(exc).splitlines() if line.strip()), "")
    return f"{type(exc).__name__}: {first[:300]}" if first else type(exc).__name__


def _exit_with_parent(launcher_pid: int) -> None:
    """If the launcher dies (even by SIGKILL), this rank exits too: no orphans.

    A forked rank's parent is the fork server, which exits with the launcher; either way
    the rank is re-parented, and that is the signal.
    """
    parent = os.getppid()

    def watch() -> None:
        while True:
            if os.getppid() != parent or not _alive(launcher_pid):
                os._exit(1)
            threading.Event().wait(0.5)

    threading.Thread(target=watch, daemon=True).start()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, PermissionError):  # gone, or its number reused
        return False
    return True


class _Inherited:
    """The launcher's file descriptor ``fd``, handed to a rank when it starts.

    Pickling goes through multiprocessing's own descriptor passing, which works for
    every start method; the rank gets a duplicate of the launcher's stream as it is
    now (a test's capture, a pipe, a terminal), not as it was when the server began.
    """

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def __reduce__(self):
        from multiprocessing.reduction import DupFd

        return _adopt, (DupFd(self.fd),)


def _adopt(dup: Any) -> int:
    return dup.detach()


def _take_over(env: dict, streams: tuple) -> None:
    """Become the launcher's child in what a program can see: environment, outputs."""
    os.environ.clear()
    os.environ.update(env)
    dist.set_debug_level_from_env()  # TORCH_DISTRIBUTED_DEBUG as the launcher has it
    sys.stdout.flush()
    sys.stderr.flush()
    for target, fd in zip((1, 2), streams):
        os.dup2(fd, target)
        os.close(fd)


def _by_value(rank: int, status: str, payload: Any) -> tuple[str, bytes]:
    """(status, the report as bytes the launcher owns once it has read them).

    A multiprocessing queue pickles with torch's reducers, which send a tensor as a
    handle to this process's shared memory: the launcher must fetch it while this rank
    still lives, and a launcher that reads late (a loaded machine) finds the rank gone
    and the result lost. Plain pickle copies the tensor's bytes instead, so the rank
    can exit at once.
    """
    try:
        return status, pickle.dumps((rank, status, payload))
    except Exception as exc:  # a result that cannot cross: say so, as a failure
        line = f"the result of rank {rank} cannot be sent to the launcher: "
        why = (line + _one_line(exc), traceback.format_exc(), None, False)
        return "error", pickle.dumps((rank, "error", why))


def _report_path(folder: str, rank: int, status: str) -> str:
    return os.path.join(folder, f"report{rank}.{status}")


def _report(folder: str, doorbell: Any, rank: int, status: str, payload: Any) -> None:
    """Leave this rank's report in ``folder``, whole (renamed into place), then ring:
    the file outlives the rank, the ring only wakes the launcher."""
    status, data = _by_value(rank, status, payload)
    part = _report_path(folder, rank, "part")
    with open(part, "wb") as f:
        f.write(data)
    os.replace(part, _report_path(folder, rank, status))
    doorbell.put(rank)
    doorbell.close()
    doorbell.join_thread()


class _Reports:
    """The launcher's side: each rank's report, read from its file once."""

    def __init__(self, folder: str, doorbell: Any, world_size: int) -> None:
        self.folder, self.doorbell, self.world_size = folder, doorbell, world_size
        self.read: set[int] = set()

    def status(self, rank: int) -> str | None:
        """Its report's status, "ok" or "error", once ``rank`` has reported."""
        found = (s for s in ("ok", "error") if os.path.exists(self._path(rank, s)))
        return next(found, None)

    def _path(self, rank: int, status: str) -> str:
        return _report_path(self.folder, rank, status)

    def load(self, rank: int) -> tuple[int, str, Any]:
        """(rank, status, payload) as ``rank`` reported it (once it has)."""
        status = self.status(rank)
        if status is None:
            raise FileNotFoundError(f"rank {rank} has not reported")
        with open(self._path(rank, status), "rb") as f:
            return pickle.loads(f.read())

    def get(self, timeout: float) -> tuple[int, str, Any]:
        """The next report not read yet: one a rank rings for within ``timeout``, or
        else one on file that no ring announced (its rank died between the two)."""
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            try:
                rank = self.doorbell.get(timeout=left)
            except queue.Empty:
                break
            if rank not in self.read:
                self.read.add(rank)
                return self.load(rank)
        for rank in range(self.world_size):
            if rank not in self.read and self.status(rank) is not None:
                self.read.add(rank)
                return self.load(rank)
        raise queue.Empty


# --8<-- [start:stacks]
STACK_SIGNAL = signal.SIGUSR1  # "say where you are": each rank's Python stack
LINGER_S = 3.0  # a failed rank waits this long to be stopped before it leaves


def _stack_on_request(store_dir: str, rank: int) -> None:
    """On STACK_SIGNAL, write this rank's Python stacks (every thread, the line each
    is on) to a file the launcher reads. ``faulthandler`` does it from C, so it works
    while the rank waits inside a collective and holds no lock."""
    stack = open(os.path.join(store_dir, f"stack{rank}.txt"), "w")  # open till exit
    faulthandler.register(STACK_SIGNAL, file=stack, all_threads=True)


def _stacks(procs: list, store_dir: str, skip: int, wait_s: float = 2.0) -> dict:
    """Ask every rank still running where it is; {rank: its stacks} of those that
    answered within ``wait_s``. The failing rank ``skip`` sent its own traceback."""
    asked = [r for r, p in enumerate(procs) if r != skip and p.is_alive()]
    for r in asked:
        try:
            os.kill(procs[r].pid, STACK_SIGNAL)
        except ProcessLookupError:  # it left on its own meanwhile
            pass
    found: dict[int, str] = {}
    last = {r: "" for r in asked}
    deadline = time.monotonic() + wait_s
    while len(found) < len(asked) and time.monotonic() < deadline:
        time.sleep(0.05)
        for r in set(asked) - set(found):
            path = os.path.join(store_dir, f"stack{r}.txt")
            text = open(path).read() if os.path.exists(path) else ""
            if text and text == last[r]:  # written, and no longer growing
                found[r] = _without_watcher(text)
            last[r] = text
    return found


def _without_watcher(stack: str) -> str:
    """A rank's stacks without the thread that watches its parent: that one is always
    in ``watch``, never on a line of the program."""
    watcher = re.compile(r'ranks\.py", line \d+ in watch$', re.M)
    return "\n\n".join(b for b in stack.split("\n\n") if not watcher.search(b))


def _dead_behind_echo(
    procs: list, reports: _Reports, payload: tuple, wait_s: float = 1.0
) -> int | None:
    """Where the first report is only an echo, the rank that died without a word
    (a crash in C++, say) is the cause: wait up to ``wait_s`` for it to be reaped."""
    if not is_echo(payload[0]):
        return None
    deadline = time.monotonic() + wait_s
    while (dead := _silent_death(procs, reports)) is None:
        if time.monotonic() > deadline:
            return None
        time.sleep(0.05)
    return dead


def _failed_too(reports: _Reports, skip: int, wait_s: float = 0.3) -> dict[int, str]:
    """The tracebacks of the ranks that failed too, just after ``skip`` did (a peer
    that timed out in the same hang): each names the line its rank waited on."""
    deadline = time.monotonic() + wait_s
    while (left := deadline - time.monotonic()) > 0:
        try:
            reports.get(timeout=left)
        except queue.Empty:
            break
    failed = [r for r in range(reports.world_size) if r != skip]
    return {
        r: reports.load(r)[2][1] for r in failed if reports.status(r) == "error"
    }  # its traceback, innermost frame last


# --8<-- [end:stacks]


def _child(
    rank: int,
    world_size: int,
    backend: str,
    timeout_s: float,
    store_dir: str,
    fn: Callable,
    args: tuple,
    doorbell: Any,
    launcher_pid: int,
    env: dict,
    streams: tuple,
) -> None:
    _take_over(env, streams)
    _exit_with_parent(launcher_pid)
    _stack_on_request(store_dir, rank)
    os.environ["LOCAL_WORLD_SIZE"] = str(world_size)
    status, payload, met = "ok", None, False
    try:
        join_group(backend, timeout_s, rank, world_size, store_dir)
        met = True  # past the rendezvous: a failure from here on is fn's
        payload = fn(*args)
    except BaseException as exc:  # anything, KeyboardInterrupt included
        usage = str(exc) if isinstance(exc, UsageError) else None
        payload = (_one_line(exc), traceback.format_exc(), usage, not met)
        status = "error"
    # Report before leaving the group: once this rank's connections close its peers fail
    # too, and the parent must hear the first cause, not its echoes.
    _report(store_dir, doorbell, rank, status, payload)
    if status == "error" and met:  # keep the group open a moment: the peers stay on
        time.sleep(LINGER_S)  # the line they wait on while the launcher asks them
    if dist.is_initialized():
        dist.destroy_process_group()
    sys.exit(0 if status == "ok" else 1)


# What the fork server imports before a fork. An optimizer's first step imports
# torch._dynamo (~2 s of CPU a rank) unless the server paid once; ``runtime.run``
# passes a list without it for a snippet whose ranks step none
# (``runtime.fork_server_preload``).
DEFAULT_PRELOAD = ("torch", "torch.distributed", "torch._dynamo")


def _context(preload: Sequence[str] = DEFAULT_PRELOAD) -> Any:
    """Fork from a server that imported ``preload`` once (Linux, macOS), else a fresh
    interpreter per rank; never ``fork``, which copies threads and CUDA state.

    A process starts its fork server once, at its first spawn, and the server keeps
    the list it started with: a later spawn's ``preload`` is not heeded. What the
    server lacks, each rank imports itself; that costs time, never a result."""
    if "forkserver" not in mp.get_all_start_methods():
        return mp.get_context("spawn")
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(list(preload))  # read only if the server starts now
    return ctx


def _stop(procs: list) -> None:
    procs = [p for p in procs if p.pid is not None]  # started ones only
    for p in procs:
        if p.is_alive():
            p.terminate()
    for p in procs:
        p.join(timeout=3)
        if p.is_alive():
            p.kill()
            p.join()


def _silent_death(procs: list, reports: _Reports) -> int | None:
    """The first rank that exited and left no report, if any. A report is on file
    before its rank exits, so no wait for late words: its exit is the last word."""
    exited = [r for r, p in enumerate(procs) if p.exitcode is not None]
    dead = [r for r in exited if reports.status(r) is None]
    return dead[0] if dead else None


# --8<-- [start:spawn]
def spawn(
    fn: Callable,
    args: tuple,
    world_size: int,
    backend: str,
    timeout_s: float,
    preload: Sequence[str] = DEFAULT_PRELOAD,
) -> list:
    ctx = _context(preload)
    doorbell = ctx.Queue()
    values: dict[int, Any] = {}
    with tempfile.TemporaryDirectory(prefix="commonplace-") as store_dir:
        reports = _Reports(store_dir, doorbell, world_size)
        common = (world_size, backend, timeout_s, store_dir, fn, args, doorbell)
        streams = (_Inherited(1), _Inherited(2))
        procs = [
            ctx.Process(
                target=_child,
                name=f"rank{r}",
                daemon=True,
                args=(r, *common, os.getpid(), dict(os.environ), streams),
            )
            for r in range(world_size)
        ]
        try:
            for p in procs:
                p.start()
            while len(values) < world_size:
                try:
                    rank, status, payload = reports.get(timeout=0.2)
                except queue.Empty:
                    if (dead := _silent_death(procs, reports)) is not None:
                        raise _died(dead, procs[dead].exitcode) from None
                    continue
                if status == "error":  # the first failure stops everyone: see finally
                    raise _failure(procs, reports, store_dir, rank, payload)
                values[rank] = payload
        finally:
            _stop(procs)
            doorbell.close()
    return [values[r] for r in range(world_size)]


def _died(rank: int, code: int | None) -> RankError:
    return RankError(rank, f"process exited with status {code} without reporting")


def _failure(
    procs: list, reports: _Reports, store_dir: str, rank: int, payload: tuple
) -> RankError:
    """The error for the first failure off the queue: its cause, not an echo (or the
    crash behind an echo), with where every other rank was and, if some returned
    while it waited, that."""
    rank, payload = first_cause(reports, rank, payload)
    dead = _dead_behind_echo(procs, reports, payload)
    if dead is not None:  # the echo of a rank that crashed
        rank, payload = dead, (_died(dead, procs[dead].exitcode).cause, "", None, False)
    stacks = _stacks(procs, store_dir, skip=rank)
    stacks |= _failed_too(reports, skip=rank)
    returned = [r for r in range(len(procs)) if reports.status(r) == "ok"]
    reason = returned_while(returned, rank, payload[1])
    return RankError(rank, *payload, reason=reason, stacks=stacks)


# --8<-- [end:spawn]
