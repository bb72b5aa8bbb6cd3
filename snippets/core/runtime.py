"""The one helper every snippet shares: start the ranks, pick backend and device, print
once, and make sure nothing ever hangs.

There are two ways in and one code path:

* ``python -m snippets run NAME -n N`` (or ``python -m snippets.<pkg>.<name>``): no
  ``RANK`` in the environment, so :func:`launch` spawns N local processes
  (:mod:`snippets.core.ranks`). They meet through a ``FileStore`` in a fresh temporary
  folder, so two runs at once never collide.
* ``torchrun --nproc-per-node N -m snippets run NAME``: torchrun already started one
  process per rank and set ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR`` and
  ``MASTER_PORT``; :func:`launch` only joins the group from the environment, so several
  nodes work unchanged.

Every process group gets a timeout (``COMMONPLACE_TIMEOUT`` seconds, 60 by default).
When a rank raises, or a collective times out, the parent stops every other rank at once
and raises :class:`RankError` naming the rank and the cause. Bad input anywhere, in the
parent or in a rank, is a :class:`UsageError`: one line, exit status 2.
"""

from __future__ import annotations

import functools
import os
import pickle
import platform
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import torch
import torch.distributed as dist

from snippets.core import ranks
from snippets.core.errors import RankError, UsageError
from snippets.core.import_graph import steps_optimizer
from snippets.core.ranks import run_rank, spawn

__all__ = [
    "BACKENDS",
    "DEFAULT_TIMEOUT_S",
    "RankError",
    "Spec",
    "UsageError",
    "choose_backend",
    "cpu_model",
    "describe_device",
    "device",
    "gpu_count",
    "launch",
    "print0",
    "run",
    "start_apart",
    "under_torchrun",
]

DEFAULT_TIMEOUT_S = float(os.environ.get("COMMONPLACE_TIMEOUT", "60"))
BACKENDS = ("auto", "gloo", "nccl")
# What makes a process a rank: torchrun sets them, and the process group reads them.
RANK_VARIABLES = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK",
                  "MASTER_ADDR", "MASTER_PORT")  # fmt: skip


@dataclass(frozen=True)
class Spec:
    """What a concept module tells the runner about itself (its attribute ``SPEC``)."""

    summary: str
    world_size: int = 1  # ranks it starts by default; 1 = a plain single process
    min_world_size: int = 1
    needs: str = "cpu"  # "cpu": runs anywhere; "gpu": only where CUDA is
    timeout_s: float = DEFAULT_TIMEOUT_S
    timed: bool = False  # it reports times: run-all runs nothing else beside it
    gpu_path: bool = False  # it has a CUDA path: ``make gpu-check`` runs it on the GPU
    # a benchmark's options for the GPU check's TFLOP/s step (JSON records, one a line)
    gpu_bench: tuple[str, ...] = ()
    reads: tuple[str, ...] = ()  # snippets whose results/<name>.json it reads


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
        fits = 0 < local_ranks <= gpus and dist.is_nccl_available()
        return "nccl" if fits else "gloo"
    if requested == "nccl" and gpus == 0:
        raise UsageError(
            "--backend nccl needs CUDA GPUs and this machine has none; "
            "use --backend gloo"
        )
    if requested == "nccl" and local_ranks > gpus:
        raise UsageError(
            f"--backend nccl with {local_ranks} ranks needs {local_ranks} GPUs, "
            f"this machine has {gpus}; use -n {gpus} or --backend gloo"
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


CPUINFO = "/proc/cpuinfo"  # Linux's; macOS and Windows have none


def cpu_model() -> str:
    """The CPU's model name: Linux's ``model name`` line, else what ``platform``
    knows (``arm``, ``x86_64``: macOS, Windows, an ARM Linux without that line)."""
    try:
        with open(CPUINFO) as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except (OSError, UnicodeDecodeError):  # none here, or not text
        pass
    return platform.processor() or platform.machine() or "an unknown CPU"


def describe_device(backend: str) -> str:
    """A human name for the hardware, for provenance: GPU model or CPU model."""
    if backend == "nccl" or (backend == "none" and torch.cuda.is_available()):
        return f"{gpu_count()}× {torch.cuda.get_device_name(0)}"
    return f"{cpu_model()} ({os.cpu_count() or '?'} cores)"


# --8<-- [start:launch]
def launch(
    fn: Callable,
    world_size: int = 2,
    backend: str = "auto",
    timeout_s: float = DEFAULT_TIMEOUT_S,
    args: tuple = (),
    preload: Sequence[str] = ranks.DEFAULT_PRELOAD,
) -> list:
    """Run ``fn(*args)`` on every rank of a fresh process group; return each rank's
    result.

    Under torchrun only this process's rank runs here, so the list has one entry.
    ``fn`` must live in an importable module (spawned ranks import it by name). Local
    ranks that fail while they meet, before ``fn`` starts (gloo's loopback connections
    have been seen to drop then), are launched once more; a second failure is raised.
    ``preload``: what the fork server imports, if this launch is the one that starts
    it (:func:`fork_server_preload`).
    """
    if not timeout_s > 0:  # a group without a timeout can hang for ever
        raise UsageError(f"the timeout must be more than 0 seconds, got {timeout_s}")
    if under_torchrun():
        backend = choose_backend(backend, int(os.environ["WORLD_SIZE"]))
        return [run_rank(fn, args, backend, timeout_s)]
    if world_size < 1:
        raise UsageError(f"-n must be at least 1, got {world_size}")
    backend = choose_backend(backend, world_size)
    if world_size == 1:  # one rank: no need to pay for a second interpreter
        with tempfile.TemporaryDirectory(prefix="commonplace-") as store_dir:
            return [run_rank(fn, args, backend, timeout_s, 0, 1, store_dir)]
    try:
        return spawn(fn, args, world_size, backend, timeout_s, preload)
    except RankError as exc:
        if not exc.at_rendezvous:
            raise
    # fresh ranks, fresh store
    return spawn(fn, args, world_size, backend, timeout_s, preload)


# --8<-- [end:launch]


def fork_server_preload(fn: Callable) -> list[str]:
    """What the fork server imports once before it forks the ranks that run ``fn``:
    torch, and ``torch._dynamo`` (which an optimizer's first step imports, ~2 s of CPU
    a rank) only where the code ``fn`` runs names an optimizer
    (:func:`~snippets.core.import_graph.steps_optimizer`; a wrong guess costs time
    only). A function whose file is unknown keeps everything."""
    path = getattr(sys.modules.get(fn.__module__), "__file__", None)
    steps = path is None or steps_optimizer(Path(path))
    return [m for m in ranks.DEFAULT_PRELOAD if steps or m != "torch._dynamo"]


def run(
    main: Callable[..., Any],
    spec: Spec,
    world_size: int | None = None,
    backend: str = "auto",
    timeout_s: float | None = None,
    options: dict | None = None,
) -> Any:
    """Run a snippet's ``main(**options)`` the way its SPEC asks; return rank 0's
    result.

    Bad input is refused here, before any rank starts: a world size under the SPEC's
    least, an unknown backend, and whatever the module's own ``check_options(options,
    world_size)`` refuses (a UsageError: options that cannot run on this many ranks).
    Every door to a snippet (``run``, ``bench``, ``python -m``, torchrun) comes here.
    """
    preload = fork_server_preload(main)  # main's own module, before any partial
    check_options = getattr(sys.modules.get(main.__module__), "check_options", None)
    n = spec.world_size if world_size is None else world_size
    if not under_torchrun() and n < spec.min_world_size:
        raise UsageError(
            f"-n must be at least {spec.min_world_size} for this snippet, got {n}"
        )
    if backend not in BACKENDS:
        choose_backend(backend, n)  # raises the one-line error
    if check_options is not None:
        size = int(os.environ["WORLD_SIZE"]) if under_torchrun() else n
        check_options(dict(options or {}), size)
    if options:  # a partial is still picklable: spawned ranks import main by name
        main = functools.partial(main, **options)
    if spec.world_size == 1 and n == 1 and not under_torchrun():
        return main()  # a single-process concept: no group at all
    timeout_s = spec.timeout_s if timeout_s is None else timeout_s
    return launch(main, n, backend, timeout_s, preload=preload)[0]


def start_apart(
    fn: Callable, args: tuple = (), timeout_s: float = DEFAULT_TIMEOUT_S
) -> Callable[[], Any]:
    """Start ``fn(*args)`` now in a fresh interpreter that is not a rank, and return a
    function that waits for its value.

    For what a rank cannot do itself: launch ranks of its own (a local rank is a
    daemon process, which may have no children; under torchrun ``launch`` would join
    the group instead). The interpreter gets this process's environment without
    ``RANK_VARIABLES``, and its ``sys.path``, so ``fn`` (importable by name, as for
    ``launch``) is found as here. Waiting past ``timeout_s`` seconds kills it; either
    way a failure is a RuntimeError with the cause in one line.
    """
    folder = tempfile.mkdtemp(prefix="commonplace-apart-")
    with open(os.path.join(folder, "call"), "wb") as f:
        pickle.dump(sys.path, f)  # first: where to find fn's module
        pickle.dump((fn, args), f)
    env = {k: v for k, v in os.environ.items() if k not in RANK_VARIABLES}
    argv = [sys.executable, "-m", "snippets.core.runtime", folder]
    root = str(Path(__file__).resolve().parents[2])  # the snippets package's parent
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [root, env.get("PYTHONPATH")]))
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL)
    name = getattr(fn, "__qualname__", repr(fn))

    def value() -> Any:
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            shutil.rmtree(folder, ignore_errors=True)
            raise RuntimeError(
                f"{name} ran past {timeout_s:g} s and was stopped"
            ) from None
        try:
            with open(os.path.join(folder, "answer"), "rb") as f:
                status, result = pickle.load(f)
        except OSError:
            status, result = "error", f"exit status {proc.returncode}, no answer"
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        if status == "error":
            raise RuntimeError(f"{name} failed in its own interpreter: {result}")
        return result

    return value


def _answer(folder: str) -> int:
    """The fresh interpreter's side of :func:`start_apart`: call, write the answer."""
    with open(os.path.join(folder, "call"), "rb") as f:
        sys.path[:0] = [p for p in pickle.load(f) if p not in sys.path]
        fn, args = pickle.load(f)
    try:
        answer = ("ok", fn(*args))
    except BaseException as exc:  # anything: the waiter hears it as one line
        first = next(iter(str(exc).splitlines()), "")
        answer = ("error", f"{type(exc).__name__}: {first}".rstrip(": "))
    with open(os.path.join(folder, "answer"), "wb") as f:
        pickle.dump(answer, f)
    return 0 if answer[0] == "ok" else 1


if __name__ == "__main__":  # python -m snippets.core.runtime FOLDER: see start_apart
    sys.exit(_answer(sys.argv[1]))
