"""The grader: a reader's function, run on real ranks, held to the project's oracles.

An :class:`Exercise` names the project's own function (its signature and docstring are
the contract the reader gets) and a ``check(fn, grade)`` that every rank runs. The
check opens cases (``with grade.case("7 elements") as case``), calls the reader's
function through ``case.call`` and compares with ``case.equal``, whose oracle is the
one the project's implementation passes: the built-in collective, ``torch.softmax``,
``scaled_dot_product_attention``, a formula.

What the grader watches, on every rank:

* **the calls.** While the reader's function runs, every ``torch.distributed`` call it
  makes is recorded (kind, peer, elements), so a check can hold a ring to its promise
  (neighbours only, 2(p−1) steps). Where the exercise is to build something from
  point-to-point, a built-in collective is refused at the call, on every rank at once.
* **the waits.** Before a rank blocks (``recv``, a request's ``wait``) it writes down
  what it waits for and on which line of the reader's file; a wait that outlasts the
  group's timeout ends the check, and the report says which rank waited on what.
* **the raises.** An exception in the reader's code stops every rank at once (the
  launcher's first-failure rule); the report shows the reader's own lines of the
  traceback, not the grader's.

Each rank keeps its cases and its current wait in a small file the launcher reads
after the ranks have stopped, however they stopped, so nothing a rank knew is lost
with it. A single-process exercise runs in the grader's own process, stopped by an
alarm if it runs past the timeout.
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import functools
import importlib.util
import inspect
import json
import os
import signal
import sys
import tempfile
import traceback
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, Iterator

import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol
import torch.distributed.distributed_c10d as c10d
from torch.utils._python_dispatch import TorchDispatchMode

from snippets.core.errors import RankError, UsageError
from snippets.core.first_cause import is_echo

DEFAULT_TIMEOUT_S = 20.0  # a wait longer than this on tiny tensors is a deadlock

# torch.distributed's built-in collectives: refused where the exercise builds one
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


@dataclass(frozen=True)
class Exercise:
    """One exercise: what the reader writes, and how it is graded.

    ``function`` is the project's own implementation: the reader's stub copies its
    signature and docstring, and it must pass ``check`` (a test makes sure).
    ``check(fn, grade)`` runs on every rank (once, in-process, where ``world_sizes``
    is ``(1,)``) and grades ``fn`` through ``grade.case``. ``solution`` is the
    ``file:section`` the note shows, printed by ``exercise solution``.
    """

    name: str
    title: str
    note: str  # the note's file stem: docs/blog/posts/<note>.md
    function: Callable
    check: Callable[[Callable, Grade], None]
    solution: str  # "snippets/…/module.py:section"
    hints: tuple[str, ...] = ()
    world_sizes: tuple[int, ...] = (1,)  # graded at each; -n N picks one
    point_to_point: bool = False  # built-in collectives refused
    imports: str = "import torch\n"  # what the stub needs for its signature
    doc: str = ""  # the contract, where the function's own docstring is not it
    signature: str = ""  # the stub's def line, where the function's has more options

    @property
    def distributed(self) -> bool:
        return self.world_sizes != (1,)

    @property
    def parameters(self) -> list[str]:
        """The names the reader's function must take, in order (more are allowed
        only with defaults)."""
        if not self.signature:
            return list(inspect.signature(self.function).parameters)
        tree = ast.parse(self.signature.strip() + "\n    pass\n").body[0]
        if not isinstance(tree, ast.FunctionDef):
            raise TypeError(f"{self.name}: its signature is not one def line")
        a = tree.args
        return [x.arg for x in a.posonlyargs + a.args + a.kwonlyargs]

    @property
    def contract(self) -> str:
        return self.doc or inspect.getdoc(self.function) or ""


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


class Stop(Exception):
    """Raised on a rank to stop every rank: its state file says why."""


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


def _is_timeout(exc: BaseException) -> bool:
    text = str(exc).lower()
    return isinstance(exc, RuntimeError) and ("timed out" in text or "timeout" in text)


def reader_lines(tb: Any, path: str) -> list[str]:
    """The frames of a traceback (or stack) that are in the reader's file, as
    ``line N, in f: code``: what the reader wrote, not the grader's internals."""
    frames = traceback.extract_tb(tb) if tb is not None else traceback.extract_stack()
    here = os.path.realpath(path)
    return [
        f"line {f.lineno}, in {f.name}: {(f.line or '').strip()}"
        for f in frames
        if os.path.realpath(f.filename) == here
    ]


class Case:
    """One case on one rank: ``call`` the reader's function, then compare."""

    def __init__(self, grade: Grade, title: str) -> None:
        self.grade, self.title = grade, title
        self.failure: str | None = None
        self.detail: list[str] = []  # shown for the first failing case only
        self.calls: list[Call] = []
        self.on_raise = ""  # a line to add where the reader's code raises
        self.received_peak = 0  # the most bytes of received buffers alive at once

    def call(self, fn: Callable, *args: Any, **kwargs: Any) -> Any:
        """Run the reader's ``fn`` with its torch.distributed calls watched."""
        grade = self.grade
        with grade.watcher.watching(grade.exercise.point_to_point) as calls:
            try:
                return fn(*args, **kwargs)
            except (Refused, Stuck) as exc:
                self._stop(str(exc), reader_lines(exc.__traceback__, grade.path))
            except Exception as exc:
                if _is_timeout(exc):  # a wait the watcher did not wrap
                    self._stop(f"it waited past the {grade.timeout_s:g} s timeout", [])
                lines = reader_lines(exc.__traceback__, grade.path)
                hint = [self.on_raise] if self.on_raise else []
                self._stop(f"it raised {type(exc).__name__}: {exc}", hint + lines)
            finally:
                self.calls = list(calls)
                self.received_peak = grade.watcher.received.peak

    def _stop(self, why: str, lines: list[str]) -> None:
        first = why.splitlines()[0] if why else why
        self.failure = first if len(first) <= 160 else first[:157] + "..."
        self.detail = lines
        self.grade.finish(self, stopped=True)
        raise Stop(why)

    def fail(self, why: str, *detail: str) -> None:
        """Record this case's failure (the first one counts) and go on."""
        if self.failure is None:
            self.failure, self.detail = why, list(detail)

    def expect(self, condition: bool, why: str, *detail: str) -> bool:
        if not condition:
            self.fail(why, *detail)
        return bool(condition)

    def equal(
        self,
        got: Any,
        expected: torch.Tensor,
        what: str = "the result",
        *,
        atol: float = 0.0,
        rtol: float = 0.0,
        mistakes: tuple[tuple[Any, str], ...] = (),
        unwritten: float | None = None,
    ) -> bool:
        """``got`` equals ``expected`` (exactly unless a tolerance is given); else the
        first element that differs, expected against got, and the hint of the first
        known mistake (an alternative wrong answer) that ``got`` matches.
        ``unwritten`` is the value an output held before the reader's code ran: an
        element that still holds it is said to be never written."""
        if not isinstance(got, torch.Tensor):
            return self.expect(False, f"{what} is {type(got).__name__}, not a tensor")
        if got.shape != expected.shape:
            return self.expect(
                False,
                f"{what} has shape {tuple(got.shape)}, not {tuple(expected.shape)}",
            )
        got_c = got.detach().to(expected.dtype)
        close = torch.isclose(got_c, expected, rtol=rtol, atol=atol, equal_nan=True)
        if bool(close.all()):
            return True
        index = tuple(int(i) for i in (~close).nonzero()[0])
        at = f"[{', '.join(map(str, index))}]" if index else ""
        why = (
            f"{what}{at}: expected {expected[index].item():.6g}, "
            f"got {got_c[index].item():.6g}"
        )
        if unwritten is not None and got_c[index].item() == unwritten:
            why += f" ({unwritten:g} is what it held before: never written)"
        hints = [h for alt, h in mistakes if _matches(got_c, alt, rtol, atol)]
        self.fail(why, *(f"hint: {h}" for h in hints[:1]))
        return False


def _matches(got: torch.Tensor, alternative: Any, rtol: float, atol: float) -> bool:
    if callable(alternative):
        return bool(alternative(got))
    alternative = torch.as_tensor(alternative).to(got.dtype)
    return got.shape == alternative.shape and bool(
        torch.allclose(
            got, alternative, rtol=max(rtol, 1e-6), atol=atol, equal_nan=True
        )
    )


class Grade:
    """What one rank knows: its cases so far and what it waits on, kept in a file."""

    def __init__(
        self,
        exercise: Exercise,
        path: str,
        state_file: str | None,
        timeout_s: float,
    ) -> None:
        self.exercise, self.path, self.timeout_s = exercise, path, timeout_s
        self.state_file = state_file
        self.rank = dist.get_rank() if dist.is_initialized() else 0
        self.world_size = dist.get_world_size() if dist.is_initialized() else 1
        self.cases: list[dict] = []
        self.wait: str | None = None
        self.watcher = Watcher.install(self)

    @contextlib.contextmanager
    def case(self, title: str) -> Iterator[Case]:
        case = Case(self, title)
        yield case
        self.finish(case)

    def finish(self, case: Case, stopped: bool = False) -> None:
        record = {"title": case.title, "failure": case.failure, "detail": case.detail}
        self.cases.append(record | {"stopped": stopped})
        self.save()

    @contextlib.contextmanager
    def waiting(self, call: Call) -> Iterator[None]:
        lines = self.here()
        self.wait = f"{call}" + (f" at {lines[-1]}" if lines else "")
        self.save()
        try:
            yield
        except RuntimeError as exc:
            if _is_timeout(exc):
                raise Stuck(
                    f"it waited past the {self.timeout_s:g} s timeout"
                ) from None
            raise
        self.wait = None
        self.save()

    def here(self) -> list[str]:
        return reader_lines(None, self.path)

    def save(self) -> None:
        if self.state_file is None:
            return
        tmp = self.state_file + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump({"cases": self.cases, "wait": self.wait}, f)
        os.replace(tmp, self.state_file)


def _signature_text(fn: Callable) -> str:
    """The ``def`` line(s) of ``fn`` as written in its file, without the body."""
    source = inspect.getsource(fn)
    node = ast.parse(source).body[0]
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        raise TypeError(f"{fn!r} is not a function defined with def")
    first_body = node.body[0]
    lines = source.splitlines()[: first_body.lineno - 1]
    return "\n".join(lines).rstrip()


def stub(exercise: Exercise, command: str) -> str:
    """The file a reader starts from: the contract, the hints, no answer."""
    fn = exercise.function
    hints = "".join(f"    # hint: {h}\n" for h in exercise.hints)
    doc = exercise.contract.replace('"""', "'''")
    body = textwrap_indent(f'"""{doc}\n"""', "    ")
    graded = (
        f"on {' and '.join(map(str, exercise.world_sizes))} ranks over gloo"
        if exercise.distributed
        else "in one process"
    )
    built = (
        "\nBuild it from send and recv: the built-in collective is refused."
        if exercise.point_to_point
        else ""
    )
    return (
        f'"""Exercise: {exercise.title}.\n\n'
        f"Write {fn.__name__} so that it does what its docstring says, then:\n\n"
        f"    {command}\n\n"
        f"The grader runs it {graded}, with the checks the project's own\n"
        f"{fn.__name__} passes.{built}\n"
        f'"""\n\n'
        f"from __future__ import annotations\n\n"
        + (f"{exercise.imports.rstrip()}\n\n" if exercise.imports.strip() else "")
        + "\n"
        f"{exercise.signature.strip() or _signature_text(fn)}\n{body}\n{hints}"
        f'    raise NotImplementedError("{fn.__name__}: your code goes here")\n'
    )


def textwrap_indent(text: str, prefix: str) -> str:
    return "\n".join(
        prefix + line if line.strip() else line for line in text.split("\n")
    )


def load(exercise: Exercise, path: str) -> Callable:
    """The reader's function from ``path``; bad input is a UsageError naming it."""
    file = Path(path)
    if not file.is_file():
        raise UsageError(f"{path}: no such file")
    source = file.read_text(encoding="utf-8")
    try:
        compile(source, str(file), "exec")
    except SyntaxError as exc:
        raise UsageError(
            f"{path}, line {exc.lineno}, column {exc.offset}: {exc.msg}"
        ) from None
    module = _import(file, exercise.name)
    name = exercise.function.__name__
    fn = getattr(module, name, None)
    if not callable(fn):
        raise UsageError(f"{path} has no function {name}: the exercise grades that one")
    want = exercise.parameters
    have = list(inspect.signature(fn).parameters.values())
    loose = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
    extra = [
        p
        for p in have[len(want) :]
        if p.default is inspect.Parameter.empty and p.kind not in loose
    ]
    if [p.name for p in have[: len(want)]] != want or extra:
        have = [p.name for p in have]
        raise UsageError(
            f"{path}: {name}({', '.join(have)}) should take ({', '.join(want)}), "
            "as the exercise's contract says"
        )
    return fn


def _import(file: Path, name: str) -> ModuleType:
    """Import the reader's file as a module of its own name (never a project name)."""
    module_name = f"_exercise_{name}"
    spec = importlib.util.spec_from_file_location(module_name, file)
    if spec is None or spec.loader is None:
        raise ImportFailed(f"{file} cannot be imported as a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        lines = reader_lines(exc.__traceback__, str(file))
        where = f" ({lines[-1]})" if lines else ""
        raise ImportFailed(f"importing it raised {type(exc).__name__}: {exc}{where}")
    return module


class ImportFailed(Exception):
    """The reader's file raised while it was imported: their bug, graded as a fail."""


@dataclass
class Outcome:
    """A check's result at one world size: each case merged over the ranks."""

    world_size: int
    cases: list[dict] = field(default_factory=list)  # title, failure, rank, detail
    stopped: str | None = None  # why the ranks stopped early
    waits: dict[int, str] = field(default_factory=dict)  # rank → what it waited on
    died: str | None = None  # a rank's process that ended without a word

    @property
    def passed(self) -> bool:
        failed = any(c["failure"] is not None for c in self.cases)
        return self.stopped is None and self.died is None and not failed

    def __or__(self, changes: dict) -> Outcome:
        return dataclasses.replace(self, **changes)


def _rank(ex: Exercise, path: str, state_dir: str, timeout_s: float) -> None:
    """Every rank's part of a check: load the reader's function, run the cases. The
    exercise travels by reference: its functions are imported by name in the rank."""
    rank = dist.get_rank() if dist.is_initialized() else 0
    grade = Grade(ex, path, os.path.join(state_dir, f"rank{rank}.json"), timeout_s)
    try:
        fn = load(ex, path)
    except ImportFailed as exc:
        grade.cases.append(
            {"title": "import", "failure": str(exc), "detail": [], "stopped": True}
        )
        grade.save()
        raise Stop(str(exc)) from None
    ex.check(fn, grade)


def check(
    exercise: Exercise, path: str, world_size: int, timeout_s: float = DEFAULT_TIMEOUT_S
) -> Outcome:
    """Grade ``path`` at one world size; the outcome merges every rank's cases."""
    load(exercise, path) if not exercise.distributed else _check_usage(exercise, path)
    with tempfile.TemporaryDirectory(prefix="commonplace-exercise-") as state_dir:
        if exercise.distributed:
            from snippets.core import ranks
            from snippets.core.runtime import fork_server_preload, launch

            ranks.PRELOAD[:] = fork_server_preload(exercise.check)  # before it forks
            args = (exercise, os.path.abspath(path), state_dir, timeout_s)
            try:
                launch(_rank, world_size, "gloo", timeout_s, args)
            except Stop:  # one rank runs here, in this process
                pass
            except RankError as exc:
                if exc.usage is not None:
                    raise UsageError(exc.usage) from None
                if not os.listdir(state_dir):  # no rank got as far as its cases
                    raise
                if "without reporting" in exc.cause:  # killed, or aborted in C++
                    died = f"rank {exc.rank}'s process died: {exc.cause}"
                    return _merge(state_dir, world_size) | {"died": died}
        else:
            _alone(exercise, path, state_dir, timeout_s)
        return _merge(state_dir, world_size)


def _check_usage(exercise: Exercise, path: str) -> None:
    """Refuse bad input here, in one line, before any rank starts."""
    try:
        load(exercise, path)
    except ImportFailed:
        pass  # graded as a failure by the ranks, with its line


def _alone(exercise: Exercise, path: str, state_dir: str, timeout_s: float) -> None:
    """A single-process exercise, in this process, stopped by an alarm."""

    def alarm(signum: int, frame: Any) -> None:
        raise Stuck(f"it ran past the {timeout_s:g} s timeout")

    previous = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, timeout_s)
    try:
        _rank(exercise, os.path.abspath(path), state_dir, timeout_s)
    except Stop:
        pass
    except Stuck as exc:  # the alarm rang in the grader's own part of a case
        with open(os.path.join(state_dir, "rank0.json"), "w", encoding="utf-8") as f:
            case = {"title": "timeout", "failure": str(exc), "detail": []}
            json.dump({"cases": [case | {"stopped": True}], "wait": None}, f)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _merge(state_dir: str, world_size: int) -> Outcome:
    outcome = Outcome(world_size)
    states = {}
    for rank in range(world_size):
        file = os.path.join(state_dir, f"rank{rank}.json")
        if os.path.exists(file):
            with open(file, encoding="utf-8") as f:
                states[rank] = json.load(f)
    titles: list[str] = []
    for state in states.values():
        for case in state["cases"]:
            if case["title"] not in titles:
                titles.append(case["title"])
    for title in titles:
        merged = {"title": title, "failure": None, "rank": None, "detail": []}
        found = [
            (rank, next((c for c in state["cases"] if c["title"] == title), None))
            for rank, state in sorted(states.items())
        ]
        failed = [
            (r, c) for r, c in found if c is not None and c["failure"] is not None
        ]
        # a peer's stop reaches a rank that waits on it as a closed connection: name
        # the rank that stopped first, not its echo
        failed.sort(key=lambda pair: is_echo(pair[1]["failure"]))
        if failed:
            rank, case = failed[0]
            merged |= {"failure": case["failure"], "rank": rank}
            merged["detail"] = case["detail"]
            if case["stopped"] and outcome.stopped is None:
                outcome.stopped = case["failure"]
        outcome.cases.append(merged)
    outcome.waits = {r: s["wait"] for r, s in states.items() if s.get("wait")}
    return outcome
