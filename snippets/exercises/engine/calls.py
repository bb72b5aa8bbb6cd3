"""The calls a reader's code makes: every ``torch.distributed`` call, watched on a rank.

While the reader's function runs, each call is recorded (kind, peer, elements, bytes),
so a check can hold a ring to its promise (neighbours only, 2(p−1) steps). Where the
exercise is to build something from point-to-point, a built-in collective is refused
at the call, on every rank at once; the functional collectives are refused by name.
Before a rank blocks (``recv``, a request's ``wait``) the watcher tells the rank's
:class:`~snippets.exercises.engine.cases.Grade`, which writes down what it waits for.
:class:`LiveBytes` counts the bytes of tensors alive at once, for a memory contract.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterator

import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol
import torch.distributed.distributed_c10d as c10d
from torch.utils._python_dispatch import TorchDispatchMode

if TYPE_CHECKING:
    from snippets.exercises.engine.cases import Grade

COLLECTIVES = (
    "all_reduce",
    "all_reduce_coalesced",
    "broadcast",
    "reduce",
    "all_gather",
    "all_gather_into_tensor",
    "_all_gather_base",
    "gather",
    "scatter",
    "reduce_scatter",
    "reduce_scatter_tensor",
    "_reduce_scatter_base",
    "all_to_all",
    "all_to_all_single",
    "barrier",
    "monitored_barrier",
    "all_gather_object",
    "broadcast_object_list",
    "gather_object",
    "scatter_object_list",
)
POINT_TO_POINT = ("send", "recv", "isend", "irecv")
# what an exercise built from point-to-point still allows: they move no data
SYNC_ONLY = ("barrier", "monitored_barrier")
# torch.distributed._functional_collectives: the same collectives, by other names
FUNCTIONAL = tuple(
    name
    for name in dir(funcol)
    if name.startswith(
        ("broadcast", "all_reduce", "all_gather", "reduce_scatter", "all_to_all")
    )
    or name == "permute_tensor"
    if callable(getattr(funcol, name))
    and not name.endswith(("_backward", "_setup_context"))
)


@dataclass
class Call:
    """One torch.distributed call the reader's code made."""

    kind: str  # "send", "irecv", "all_reduce", …
    peer: int | None  # the global rank at the other end, for point-to-point
    numel: int
    dtype: str = ""  # of the (first) tensor it moves
    nbytes: int = 0  # of every tensor it moves, whatever their dtype

    def __str__(self) -> str:
        to = {"send": " to", "isend": " to", "recv": " from", "irecv": " from"}
        where = (
            f"{to.get(self.kind, '')} rank {self.peer}" if self.peer is not None else ""
        )
        return f"{self.kind}{where} ({self.numel} elements)"


class Live:
    """Bytes of tensors alive at once, and the most there ever were: a storage counts
    from the first tensor registered on it until the last of them is gone."""

    def __init__(self, exclude: tuple = ()) -> None:
        self.now = self.peak = 0
        self.storages: dict[int, list[int]] = {}  # data_ptr → [bytes, tensors]
        self.tensors: set[int] = set()  # ids of the registered tensors alive
        self.exclude = {_storage(t)[0] for t in exclude if isinstance(t, torch.Tensor)}

    def add(self, t: torch.Tensor) -> None:
        ptr, nbytes = _storage(t)
        if not nbytes or ptr in self.exclude or id(t) in self.tensors:
            return
        held = self.storages.setdefault(ptr, [nbytes, 0])
        if held[1] == 0:
            self.now += nbytes
            self.peak = max(self.peak, self.now)
        held[1] += 1
        self.tensors.add(id(t))
        weakref.finalize(t, self._gone, ptr, id(t))

    def _gone(self, ptr: int, key: int) -> None:
        self.tensors.discard(key)
        held = self.storages.get(ptr)
        if held is None:
            return
        held[1] -= 1
        if held[1] == 0:
            self.now -= held[0]
            del self.storages[ptr]


def _storage(t: torch.Tensor) -> tuple[int, int]:
    storage = t.untyped_storage()
    return storage.data_ptr(), storage.nbytes()


class LiveBytes(TorchDispatchMode):
    """Every tensor an operation makes while the mode is on, counted by :class:`Live`:
    ``peak`` is the most bytes they held at once (the inputs' own storages left out)."""

    def __init__(self, *inputs: Any) -> None:
        super().__init__()
        self.live = Live(inputs)

    @property
    def peak(self) -> int:
        return self.live.peak

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in out if isinstance(out, (tuple, list)) else (out,):
            if isinstance(t, torch.Tensor) and t.device.type != "meta":
                self.live.add(t)
        return out


class Refused(Exception):
    """A built-in collective in an exercise that builds it from point-to-point."""


class Stuck(Exception):
    """A wait that outlasted the group's timeout."""


class Watcher:
    """Wraps torch.distributed's functions once per process; records while on.

    Both ``torch.distributed.X`` and ``distributed_c10d.X`` are replaced, so a reader's
    ``from torch.distributed import send`` and ``dist.P2POp(dist.isend, …)`` meet the
    wrapper too. Outside ``watching()`` (the grader computing its oracle) every call
    goes straight through.
    """

    installed: Watcher | None = None  # one per process: the wrappers are global

    @classmethod
    def install(cls, grade: Grade) -> Watcher:
        if cls.installed is None:
            cls.installed = cls(grade)
        cls.installed.grade = grade
        return cls.installed

    def __init__(self, grade: Grade) -> None:
        self.grade = grade
        self.on = self.inside = False
        self.refuse = False
        self.calls: list[Call] = []
        self.received = Live()  # the buffers the reader's receives filled
        self.original = {n: getattr(c10d, n) for n in COLLECTIVES + POINT_TO_POINT}
        for name, fn in self.original.items():
            wrapped = self._wrap(name, fn)
            setattr(c10d, name, wrapped)
            if hasattr(dist, name):
                setattr(dist, name, wrapped)
        for name in FUNCTIONAL:
            setattr(funcol, name, self._wrap_functional(name, getattr(funcol, name)))

    @contextlib.contextmanager
    def watching(self, refuse: bool) -> Iterator[list[Call]]:
        self.on, self.refuse, self.calls = True, refuse, []
        self.received = Live()
        try:
            yield self.calls
        finally:
            self.on = self.refuse = False

    def _wrap(self, name: str, fn: Callable) -> Callable:
        signature = inspect.signature(fn)

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if not self.on or self.inside:  # torch's recv calls irecv: count one
                return fn(*args, **kwargs)
            call = self._describe(name, signature, args, kwargs)
            if self.refuse and name in COLLECTIVES and name not in SYNC_ONLY:
                raise Refused(
                    f"it calls torch.distributed.{name}: this exercise builds it "
                    "from send and recv, so the built-in is refused"
                )
            self.calls.append(call)
            if name in ("recv", "irecv") and isinstance(
                args[0] if args else None, torch.Tensor
            ):
                buffer = args[0]
                self.received.add(buffer if buffer._base is None else buffer._base)
            self.inside = True
            try:
                if name in ("send", "recv"):
                    with self.grade.waiting(call):
                        return fn(*args, **kwargs)
                work = fn(*args, **kwargs)
            finally:
                self.inside = False
            return _Request(work, call, self.grade) if work is not None else None

        return wrapper

    def _wrap_functional(self, name: str, fn: Callable) -> Callable:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if self.on and not self.inside and self.refuse:
                raise Refused(
                    f"it calls torch.distributed._functional_collectives.{name}: "
                    "this exercise builds it from send and recv, so the built-in "
                    "collectives are refused"
                )
            return fn(*args, **kwargs)

        return wrapper

    @staticmethod
    def _describe(name: str, signature: Any, args: tuple, kwargs: dict) -> Call:
        bound = signature.bind_partial(*args, **kwargs).arguments
        first = next(iter(bound.values()), None)
        tensors = [first] if isinstance(first, torch.Tensor) else []
        if isinstance(first, (list, tuple)):
            tensors = [t for t in first if isinstance(t, torch.Tensor)]
        numel = sum(t.numel() for t in tensors)
        nbytes = sum(t.numel() * t.element_size() for t in tensors)
        dtype = str(tensors[0].dtype).removeprefix("torch.") if tensors else ""
        peer = None
        for key in ("dst", "src", "group_dst", "group_src"):
            if name in POINT_TO_POINT and bound.get(key) is not None:
                peer = bound[key]
                if key.startswith("group_") and bound.get("group") is not None:
                    peer = dist.get_global_rank(bound["group"], peer)
                break
        return Call(name, peer, numel, dtype, nbytes)


class _Request:
    """A request of isend/irecv whose ``wait`` says what it waits for."""

    def __init__(self, work: Any, call: Call, grade: Grade) -> None:
        self._work, self._call, self._grade = work, call, grade

    def wait(self, *args: Any, **kwargs: Any) -> Any:
        with self._grade.waiting(self._call):
            return self._work.wait(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._work, name)


def is_timeout(exc: BaseException) -> bool:
    text = str(exc).lower()
    return isinstance(exc, RuntimeError) and ("timed out" in text or "timeout" in text)
