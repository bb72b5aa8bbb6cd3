"""The runtime's promises: results come back per rank, a failing rank stops all ranks
and is named with its traceback and the line it failed on, a deadlock ends at the
timeout, no process is left behind, and the device is described on any machine."""

from __future__ import annotations

import inspect
import os
import platform
import re
import signal
import subprocess
import sys
import time
import traceback
from pathlib import Path

import pytest
import rank_workers
import torch
import torch.distributed as dist
from conftest import REPO, alive, process_children, refused

from snippets.core import runtime
from snippets.core.cli import guarded
from snippets.core.errors import RemoteTraceback
from snippets.core.runtime import RankError, UsageError, choose_backend, launch


def rank_and_sum() -> tuple[int, float]:
    t = torch.tensor([float(dist.get_rank() + 1)])
    dist.all_reduce(t)
    return dist.get_rank(), t.item()


def rank_two_raises() -> None:
    if dist.get_rank() == 2:
        raise ValueError("rank two was told to fail")
    dist.barrier()  # the others wait here for rank 2, which never comes


def everyone_receives() -> None:
    buf = torch.zeros(4)
    dist.recv(
        buf, src=(dist.get_rank() + 1) % dist.get_world_size()
    )  # nobody sends: a deadlock


def rank_one_refuses() -> None:
    if dist.get_rank() == 1:
        raise UsageError("--widgets must be even, got 3")
    dist.barrier()


def nap() -> None:
    os.write(
        1, f"{os.getpid()}\n".encode()
    )  # one write: two ranks' lines never interleave
    time.sleep(120)


@pytest.mark.parametrize("n", [1, 3])
def test_launch_returns_every_rank_result(n: int) -> None:
    results = launch(rank_and_sum, n, backend="gloo", timeout_s=30)
    assert [r for r, _ in results] == list(range(n))
    assert all(s == n * (n + 1) / 2 for _, s in results)  # 1 + 2 + … + n
    assert process_children(os.getpid()) == []


def test_a_failing_rank_stops_all_and_is_named() -> None:
    start = time.monotonic()
    with pytest.raises(RankError) as err:
        launch(rank_two_raises, 4, backend="gloo", timeout_s=60)
    assert err.value.rank == 2
    assert "ValueError: rank two was told to fail" in str(err.value)
    assert time.monotonic() - start < 30, (
        "the others should be stopped at once, not at their timeout"
    )
    assert process_children(os.getpid()) == []


def test_bad_input_found_inside_a_rank_is_one_line_and_exit_2(capfd) -> None:
    def body() -> int:
        launch(rank_one_refuses, 3, backend="gloo", timeout_s=60)
        return 0

    line = refused([], capfd, entry=lambda _: guarded(body))
    assert line == "error: --widgets must be even, got 3"
    assert process_children(os.getpid()) == []


@pytest.mark.parametrize("timeout_s", [0, -1.0])
def test_every_group_has_a_timeout(timeout_s: float) -> None:
    with pytest.raises(UsageError, match="timeout must be more than 0"):
        launch(rank_and_sum, 2, backend="gloo", timeout_s=timeout_s)


def test_a_deadlock_ends_at_the_timeout() -> None:
    start = time.monotonic()
    with pytest.raises(RankError) as err:
        launch(everyone_receives, 2, backend="gloo", timeout_s=3)
    elapsed = time.monotonic() - start
    assert elapsed < 60, f"took {elapsed:.1f} s for a 3 s timeout"
    assert "rank" in str(err.value) and err.value.cause
    assert process_children(os.getpid()) == []


def test_ranks_exit_when_the_launcher_is_killed() -> None:
    code = (
        "import sys; sys.path[:0] = ['tests', 'tests/core']; "
        "from test_runtime import nap; "
        "from snippets.core.runtime import launch; launch(nap, 2, backend='gloo')"
    )
    parent = subprocess.Popen(
        [sys.executable, "-c", code], cwd=REPO, stdout=subprocess.PIPE, text=True
    )
    try:
        pids = [int(parent.stdout.readline()) for _ in range(2)]
        assert set(pids) <= set(process_children(parent.pid))
    finally:
        parent.send_signal(signal.SIGKILL)
        parent.wait()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(alive(p) for p in pids):
        time.sleep(0.2)
    assert not any(alive(p) for p in pids), "orphaned ranks kept running"


def test_backend_choice_refuses_what_cannot_work() -> None:
    with pytest.raises(UsageError, match="unknown backend"):
        choose_backend("mpi-ish", 2)
    if not torch.cuda.is_available():
        with pytest.raises(UsageError, match="needs CUDA GPUs"):
            choose_backend("nccl", 2)
        assert choose_backend("auto", 4) == "gloo"
    else:
        with pytest.raises(UsageError, match="GPUs"):
            choose_backend("nccl", torch.cuda.device_count() + 1)
    with pytest.raises(UsageError, match="at least 1"):
        launch(rank_and_sum, 0)


@pytest.mark.parametrize(
    "entry",
    [["snippets.comm.process_groups"], ["snippets", "run", "process_groups"]],
    ids=["module", "layout-free"],
)
def test_torchrun_runs_a_snippet_unchanged(entry: list[str]) -> None:
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2"]
    torchrun.append("--standalone")  # a free port of its own: runs never collide
    proc = subprocess.run(
        [*torchrun, "-m", *entry],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "world: 2 ranks, backend gloo" in proc.stdout
    assert "all_reduce(rank) = 1" in proc.stdout  # 0 + 1, summed by both ranks


@pytest.mark.parametrize(
    "failures, calls, raises",
    [([True], 2, False), ([True, True], 2, True), ([False], 1, True)],
)
def test_ranks_that_fail_while_meeting_are_launched_once_more(
    monkeypatch, failures: list[bool], calls: int, raises: bool
) -> None:
    seen = []

    def spawn(fn, args, world_size, backend, timeout_s, preload):
        seen.append(world_size)
        if len(seen) <= len(failures):
            raise RankError(1, "Connection closed by peer", at_rendezvous=failures[0])
        return ["ok"] * world_size

    monkeypatch.setattr(runtime, "spawn", spawn)
    if raises:
        with pytest.raises(RankError, match="Connection closed"):
            launch(rank_and_sum, 2, backend="gloo", timeout_s=10)
    else:
        assert launch(rank_and_sum, 2, backend="gloo", timeout_s=10) == ["ok", "ok"]
    assert seen == [2] * calls


# --- start_apart: a fresh interpreter, for what a rank cannot do itself ---


def ranks_of_its_own() -> list:
    return launch(rank_and_sum, 2, "gloo", timeout_s=60)


def start_ranks_from_a_rank() -> list | None:
    if dist.get_rank() != 0:
        return None
    return runtime.start_apart(ranks_of_its_own, timeout_s=120)()


def what_makes_a_rank() -> dict:
    seen = {k: os.environ.get(k) for k in runtime.RANK_VARIABLES}
    return seen | {"under_torchrun": runtime.under_torchrun()}


def refuses(what: str) -> None:
    raise ValueError(f"{what}\nsecond line")


def test_a_rank_starts_ranks_of_its_own_apart() -> None:
    # inside a rank, launch itself cannot: a local rank may not have children
    got = launch(start_ranks_from_a_rank, 2, "gloo", timeout_s=180)
    assert got == [[(0, 3.0), (1, 3.0)], None]  # 1 + 2 on each of the two new ranks
    assert process_children(os.getpid()) == []


def test_the_interpreter_apart_is_no_rank(monkeypatch) -> None:
    for k in runtime.RANK_VARIABLES:
        monkeypatch.setenv(k, "7")
    assert runtime.under_torchrun()  # here it looks like a torchrun rank
    seen = runtime.start_apart(what_makes_a_rank)()
    assert seen == dict.fromkeys(runtime.RANK_VARIABLES) | {"under_torchrun": False}


def test_a_failure_apart_is_one_line_and_a_hang_is_stopped() -> None:
    with pytest.raises(RuntimeError, match=r"refuses failed .*: ValueError: no$"):
        runtime.start_apart(refuses, ("no",))()
    start = time.monotonic()
    with pytest.raises(RuntimeError, match="sleep ran past 1 s"):
        runtime.start_apart(time.sleep, (60,), timeout_s=1)()
    assert time.monotonic() - start < 30
    assert process_children(os.getpid()) == []


class Stopped(Exception):
    """Raised where a test has seen what it came for, before any rank starts."""


def test_the_runtime_decides_what_the_fork_server_preloads(monkeypatch) -> None:
    """A snippet that steps no optimizer does without torch._dynamo; one that does, or
    one whose file is unknown, keeps it; ``run`` hands the choice through ``launch``
    and ``spawn`` to the context that starts the fork server."""
    from snippets.comm.collective import collectives
    from snippets.core import ranks
    from snippets.parallel.sharded import zero

    every = list(ranks.DEFAULT_PRELOAD)
    assert "torch._dynamo" in every
    assert runtime.fork_server_preload(zero.main) == every
    without = runtime.fork_server_preload(collectives.main)
    assert without == [m for m in every if m != "torch._dynamo"]
    assert runtime.fork_server_preload(eval("lambda: None")) == every  # no file
    seen = []

    def context(preload=ranks.DEFAULT_PRELOAD):  # what the launch would start with
        seen.append(list(preload))
        raise Stopped

    monkeypatch.setattr(ranks, "_context", context)
    spec = runtime.Spec("s", world_size=2)
    # with options, run wraps main in a partial: the choice is still main's module's
    for main, options, want in [
        (collectives.main, None, without),
        (zero.main, {"steps": 1}, every),
    ]:
        with pytest.raises(Stopped):
            runtime.run(main, spec, 2, "gloo", options=options)
        assert seen == [want]
        seen.clear()


def waits_in_a_collective_or_sleeps() -> None:
    """Rank 0 all-reduces; rank 1 never joins it, asleep on a line of its own."""
    if dist.get_rank() == 0:
        dist.all_reduce(torch.ones(1))
    else:
        time.sleep(60)  # THE LINE THE STACK MUST NAME


def test_a_hang_names_the_line_each_other_rank_was_on() -> None:
    with pytest.raises(RankError) as err:
        launch(waits_in_a_collective_or_sleeps, 2, backend="gloo", timeout_s=2)
    assert err.value.rank == 0  # the collective timed out there
    stack = err.value.stacks[1]  # and rank 1 was asked where it was
    lines = Path(__file__).read_text().splitlines()
    line = next(i for i, text in enumerate(lines, 1) if "THE LINE THE STACK" in text)
    assert f'test_runtime.py", line {line} in waits_in_a_collective_or_sleeps' in stack
    assert process_children(os.getpid()) == []


def test_the_command_line_prints_the_other_ranks_stacks(capsys) -> None:
    def body() -> int:
        error = RankError(0, "RuntimeError: timed out", "Traceback: here\n")
        error.stacks = {1: 'Stack (most recent call first):\n  File "x.py", line 7\n'}
        raise error

    assert guarded(body) == 1
    err = capsys.readouterr().err.splitlines()
    assert err.count("[rank 1] where it was when rank 0 failed:") == 1  # once
    assert '[rank 1]   File "x.py", line 7' in err
    assert err[-1] == "error: rank 0 failed: RuntimeError: timed out"

    def returned() -> int:
        why = "rank 1 returned while rank 0 was still in all_reduce at x.py:7"
        raise RankError(0, "RuntimeError: closed", "Traceback: here\n", reason=why)

    assert guarded(returned) == 1
    last = capsys.readouterr().err.splitlines()[-1]
    assert last == (
        "error: rank 0 failed: RuntimeError: closed; rank 1 returned while rank 0 "
        "was still in all_reduce at x.py:7"
    )


def crashes_while_its_peer_waits() -> None:
    """Rank 1 dies without a word, as a crash in C++ would; rank 0 waits on it."""
    if dist.get_rank() == 1:
        os.abort()
    dist.all_reduce(torch.ones(1))


def test_a_crash_is_named_not_the_echo_its_peer_reports() -> None:
    with pytest.raises(RankError) as err:
        launch(crashes_while_its_peer_waits, 2, backend="gloo", timeout_s=20)
    assert err.value.rank == 1, err.value  # not rank 0's "Connection closed by peer"
    assert "without reporting" in err.value.cause


# --- the error launch raises carries what the command line prints ---


def marked(fn, marker: str) -> tuple[str, int]:
    """(file, line) of the line of ``fn``'s source that ends with ``# marker``."""
    lines, first = inspect.getsourcelines(fn)
    at = next(i for i, t in enumerate(lines) if t.rstrip().endswith(f"# {marker}"))
    return inspect.getsourcefile(fn), first + at


@pytest.mark.timeout(120)
def test_a_rank_that_returned_is_named_with_the_line_its_peer_waited_on() -> None:
    """Rank 0 makes one all_reduce more than rank 1: rank 1 returns, and rank 0 fails
    in that all_reduce with only a closed connection to say."""
    with pytest.raises(RankError) as err:
        launch(rank_workers.one_all_reduce_more, 2, backend="gloo", timeout_s=20)
    file, line = marked(rank_workers.one_all_reduce_more, "THE EXTRA ALL_REDUCE")
    said = str(err.value).splitlines()
    assert said[0].startswith("rank 0 failed: ") and err.value.rank == 0
    why = f"rank 1 returned while rank 0 was still in all_reduce at {file}:{line}"
    assert said[1] == why, said
    cause = err.value.__cause__
    assert isinstance(cause, RemoteTraceback)
    assert f'File "{file}", line {line}, in one_all_reduce_more' in str(cause)
    assert process_children(os.getpid()) == []


@pytest.mark.timeout(120)
def test_a_raising_rank_is_the_cause_and_the_others_stacks_are_said() -> None:
    with pytest.raises(RankError) as err:
        launch(rank_workers.raises_on_rank_one, 2, backend="gloo", timeout_s=20)
    file, line = marked(rank_workers.raises_on_rank_one, "THE VALUEERROR")
    said = str(err.value).splitlines()
    assert said[0] == "rank 1 failed: ValueError: rank one was told to fail"
    assert err.value.cause == "ValueError: rank one was told to fail"  # as before
    assert f'File "{file}", line {line}, in raises_on_rank_one' in str(
        err.value.__cause__
    )
    # Python prints the rank's traceback above the launcher's, as for a process pool
    printed = "".join(traceback.format_exception(err.value))
    assert printed.index(f'"{file}", line {line}') < printed.index("direct cause")
    # rank 0 waited in its barrier: the message says where, from its stack (or, on a
    # loaded machine, from its own traceback if it failed too before it was asked)
    _, waits = marked(rank_workers.raises_on_rank_one, "RANK ZERO WAITS HERE")
    assert "[rank 0] where it was when rank 1 failed:" in said
    frame = re.escape(f'[rank 0]   File "{file}", line {waits}') + ",? in raises_on"
    assert any(re.match(frame, s) for s in said), said
    assert not any(" in watch" in s for s in said)  # not the launcher's own thread
    assert process_children(os.getpid()) == []


def test_the_cpu_is_named_where_there_is_no_proc_cpuinfo(monkeypatch, tmp_path) -> None:
    cores = f"({os.cpu_count()} cores)"
    monkeypatch.setattr(runtime, "CPUINFO", str(tmp_path / "none"))  # as on macOS
    monkeypatch.setattr(platform, "processor", lambda: "arm")
    assert runtime.describe_device("gloo") == f"arm {cores}"
    info = tmp_path / "cpuinfo"  # an ARM Linux: no "model name" line
    info.write_text("processor\t: 0\nCPU implementer\t: 0x41\n")
    monkeypatch.setattr(runtime, "CPUINFO", str(info))
    monkeypatch.setattr(platform, "processor", lambda: "")
    monkeypatch.setattr(platform, "machine", lambda: "aarch64")
    assert runtime.describe_device("gloo") == f"aarch64 {cores}"
    info.write_text("processor\t: 0\nmodel name\t: Example CPU 9000 @ 2.0GHz\n")
    assert runtime.describe_device("gloo") == f"Example CPU 9000 @ 2.0GHz {cores}"
