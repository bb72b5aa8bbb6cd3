"""The one helper every snippet shares: start the ranks, pick backend and device, print
once, and make sure nothing ever hangs.

There are two ways in and one code path:

* ``python -m snippets.<name>`` (or ``python -m snippets run <name> -n N``): no ``RANK`` in
  the environment, so :func:`launch` spawns N local processes. They meet through a
  ``FileStore`` in a fresh temporary folder, so two runs at once never collide.
* ``torchrun --nproc-per-node N -m snippets.<name>``: torchrun already started one process
  per rank and set ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR`` and
  ``MASTER_PORT``; :func:`launch` only joins the group from the environment, so several
  nodes work unchanged.

Every process group gets a timeout (``COMMONPLACE_TIMEOUT`` seconds, 60 by default). When
a rank raises, or a collective times out, the parent stops every other rank at once and
raises :class:`RankError` naming the rank and the cause.
"""

from __future__ import annotations

import datetime
import functools
import multiprocessing as mp
import os
import platform
import queue
import sys
import tempfile
import threading
import traceback
from dataclasses import dataclass
from typing import Any, Callable

import torch
import torch.distributed as dist

DEFAULT_TIMEOUT_S = float(os.environ.get("COMMONPLACE_TIMEOUT", "60"))
BACKENDS = ("auto", "gloo", "nccl")


class UsageError(Exception):
    """Bad input from the person at the keyboard: reported in one line, exit status 2."""


class RankError(RuntimeError):
    """A rank raised, timed out or died. ``str()`` names the rank and the cause."""

    def __init__(
        self,
        rank: int,
        cause: str,
        remote_traceback: str = "",
        usage: str | None = None,
    ):
        super().__init__(f"rank {rank} failed: {cause}")
        self.rank, self.cause, self.remote_traceback = rank, cause, remote_traceback
        self.usage = (
            usage  # the message, when the rank refused bad input (a UsageError)
        )


@dataclass(frozen=True)
class Spec:
    """What a concept module tells the runner about itself (module attribute ``SPEC``)."""

    summary: str
    world_size: int = 1  # ranks it starts by default; 1 = a plain single process
    min_world_size: int = 1
    needs: str = "cpu"  # "cpu": runs anywhere; "gpu": only where CUDA is
    timeout_s: float = DEFAULT_TIMEOUT_S


# --8<-- [start:backend]
def under_torchrun() -> bool:
    return "RANK" in os.environ and "WORLD_SIZE" in os.environ


def gpu_count() -> int:
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def choose_backend(requested: str, world_size: int) -> str:
    """auto → NCCL when every local rank can have a GPU of its own, else gloo."""
    if requested not in BACKENDS:
        raise UsageError(f"unknown backend {requested!r}: choose auto, gloo or nccl")
    local_ranks = int(os.environ.get("LOCAL_WORLD_SIZE", world_size))
    gpus = gpu_count()
    if requested == "auto":
        return (
            "nccl" if 0 < local_ranks <= gpus and dist.is_nccl_available() else "gloo"
        )
    if requested == "nccl" and gpus == 0:
        raise UsageError(
            "--backend nccl needs CUDA GPUs and this machine has none; use --backend gloo"
        )
    if requested == "nccl" and local_ranks > gpus:
        raise UsageError(
            f"--backend nccl with {local_ranks} ranks needs {local_ranks} GPUs, this machine has {gpus}; "
            f"use -n {gpus} or --backend gloo"
        )
    return requested


def device() -> torch.device:
    """The device this rank computes on: its own GPU under NCCL, otherwise the CPU."""
    if dist.is_initialized():
        if dist.get_backend() == "nccl":
            return torch.device("cuda", torch.cuda.current_device())
        return torch.device("cpu")
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


# --8<-- [end:backend]


def print0(*args: Any, **kwargs: Any) -> None:
    """print on rank 0 only (or always, outside a process group)."""
    if not dist.is_initialized() or dist.get_rank() == 0:
        print(*args, **kwargs, flush=True)


def describe_device(backend: str) -> str:
    """A human name for the hardware, for provenance: GPU model or CPU model."""
    if backend == "nccl" or (backend == "none" and torch.cuda.is_available()):
        return f"{gpu_count()}× {torch.cuda.get_device_name(0)}"
    name = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            name = next(
                line.split(":", 1)[1].strip()
                for line in f
                if line.startswith("model name")
            )
    except (OSError, StopIteration):
        pass
    return f"{name} ({os.cpu_count()} cores)"


# --8<-- [start:join]
def _join_group(
    backend: str, timeout_s: float, rank: int, world_size: int, store_dir: str | None
) -> None:
    timeout = datetime.timedelta(seconds=timeout_s)
    if backend == "nccl":
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", rank)))
    if (
        store_dir is None
    ):  # torchrun: MASTER_ADDR/MASTER_PORT/RANK/WORLD_SIZE come from the environment
        dist.init_process_group(backend, timeout=timeout)
    else:  # local spawn: a file in a private temp dir is the rendezvous, so runs never collide
        store = dist.FileStore(os.path.join(store_dir, "rendezvous"), world_size)
        dist.init_process_group(
            backend, store=store, rank=rank, world_size=world_size, timeout=timeout
        )
    if (
        backend == "gloo"
    ):  # N ranks share the cores: don't let each one start a thread per core
        torch.set_num_threads(
            max(
                1,
                (os.cpu_count() or 1)
                // int(os.environ.get("LOCAL_WORLD_SIZE", world_size)),
            )
        )


def _run_rank(
    fn: Callable,
    args: tuple,
    backend: str,
    timeout_s: float,
    rank: int = 0,
    world_size: int = 1,
    store_dir: str | None = None,
) -> Any:
    _join_group(backend, timeout_s, rank, world_size, store_dir)
    try:
        return fn(*args)
    finally:
        dist.destroy_process_group()


# --8<-- [end:join]


def _one_line(exc: BaseException) -> str:
    first = next((line.strip() for line in str(exc).splitlines() if line.strip()), "")
    return f"{type(exc).__name__}: {first[:300]}" if first else type(exc).__name__


def _exit_with_parent(parent_pid: int) -> None:
    """If the parent dies (even by SIGKILL), this rank exits too: no orphans."""

    def watch() -> None:
        while True:
            if os.getppid() != parent_pid:
                os._exit(1)
            threading.Event().wait(0.5)

    threading.Thread(target=watch, daemon=True).start()


def _child(
    rank: int,
    world_size: int,
    backend: str,
    timeout_s: float,
    store_dir: str,
    fn: Callable,
    args: tuple,
    results: Any,
    parent_pid: int,
) -> None:
    _exit_with_parent(parent_pid)
    os.environ["LOCAL_WORLD_SIZE"] = str(world_size)
    status, payload = "ok", None
    try:
        _join_group(backend, timeout_s, rank, world_size, store_dir)
        payload = fn(*args)
    except BaseException as exc:  # anything, KeyboardInterrupt included
        usage = str(exc) if isinstance(exc, UsageError) else None
        status, payload = "error", (_one_line(exc), traceback.format_exc(), usage)
    # Report before leaving the group: once this rank's connections close its peers fail
    # too, and the parent must hear the first cause, not its echoes.
    results.put((rank, status, payload))
    results.close()
    results.join_thread()
    if dist.is_initialized():
        dist.destroy_process_group()
    sys.exit(0 if status == "ok" else 1)


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


# --8<-- [start:spawn]
def _spawn(
    fn: Callable, args: tuple, world_size: int, backend: str, timeout_s: float
) -> list:
    ctx = mp.get_context("spawn")  # fresh interpreters: safe with CUDA and with threads
    results = ctx.Queue()
    values: dict[int, Any] = {}
    with tempfile.TemporaryDirectory(prefix="commonplace-") as store_dir:
        procs = [
            ctx.Process(
                target=_child,
                name=f"rank{r}",
                daemon=True,
                args=(
                    r,
                    world_size,
                    backend,
                    timeout_s,
                    store_dir,
                    fn,
                    args,
                    results,
                    os.getpid(),
                ),
            )
            for r in range(world_size)
        ]
        try:
            for p in procs:
                p.start()
            while len(values) < world_size:
                try:
                    rank, status, payload = results.get(timeout=0.2)
                except queue.Empty:
                    dead = [
                        r
                        for r, p in enumerate(procs)
                        if p.exitcode not in (None, 0) and r not in values
                    ]
                    if dead:  # died without a word (signal, os._exit): give its message a moment to arrive
                        try:
                            rank, status, payload = results.get(timeout=1.0)
                        except queue.Empty:
                            code = procs[dead[0]].exitcode
                            raise RankError(
                                dead[0],
                                f"process exited with status {code} without reporting",
                            ) from None
                    else:
                        continue
                if (
                    status == "error"
                ):  # the first failure stops everyone: the finally below
                    raise RankError(rank, *payload)
                values[rank] = payload
        finally:
            _stop(procs)
            results.close()
    return [values[r] for r in range(world_size)]


# --8<-- [end:spawn]


# --8<-- [start:launch]
def launch(
    fn: Callable,
    world_size: int = 2,
    backend: str = "auto",
    timeout_s: float = DEFAULT_TIMEOUT_S,
    args: tuple = (),
) -> list:
    """Run ``fn(*args)`` on every rank of a fresh process group; return the per-rank results.

    Under torchrun only this process's rank runs here, so the list has one entry.
    ``fn`` must live in an importable module (spawned ranks import it by name).
    """
    if under_torchrun():
        backend = choose_backend(backend, int(os.environ["WORLD_SIZE"]))
        return [_run_rank(fn, args, backend, timeout_s)]
    if world_size < 1:
        raise UsageError(f"-n must be at least 1, got {world_size}")
    backend = choose_backend(backend, world_size)
    if world_size == 1:  # one rank: no need to pay for a second interpreter
        with tempfile.TemporaryDirectory(prefix="commonplace-") as store_dir:
            return [_run_rank(fn, args, backend, timeout_s, 0, 1, store_dir)]
    return _spawn(fn, args, world_size, backend, timeout_s)


# --8<-- [end:launch]


def run(
    main: Callable[..., Any],
    spec: Spec,
    world_size: int | None = None,
    backend: str = "auto",
    timeout_s: float | None = None,
    options: dict | None = None,
) -> Any:
    """Run a snippet's ``main(**options)`` the way its SPEC asks; return rank 0's result."""
    if options:
        main = functools.partial(
            main, **options
        )  # still picklable: spawned ranks import main by name
    n = spec.world_size if world_size is None else world_size
    if not under_torchrun() and n < spec.min_world_size:
        raise UsageError(
            f"-n must be at least {spec.min_world_size} for this snippet, got {n}"
        )
    if backend not in BACKENDS:
        choose_backend(backend, n)  # raises the one-line error
    if spec.world_size == 1 and n == 1 and not under_torchrun():
        return main()  # a single-process concept: no group at all
    return launch(main, n, backend, spec.timeout_s if timeout_s is None else timeout_s)[
        0
    ]
