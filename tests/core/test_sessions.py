"""Sessions on cheap commands (``python -c``, no torchrun): a command that ends is left
alone and its output kept; one that fails stops the others; a deadline that passes
stops the session; what ignores SIGTERM in the session is killed with it, and what
ignores it in a session of its own is found by the run's mark and killed; the
commands see the mark and no rank variables; and without /proc nothing is found and
nothing breaks."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import process_children

from snippets.core import sessions
from snippets.core.sessions import run_sessions

SLEEP = "import time; time.sleep(120)"
IGNORE_TERM = "import signal; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
# A command that starts a child ignoring SIGTERM (in its own session or not), waits
# until it is ready, prints its pid and sleeps: the deadline comes after all that.
WITH_CHILD = (
    "import subprocess, sys, time\n"
    "child = subprocess.Popen([sys.executable, '-c', {child!r}], "
    "stdout=subprocess.PIPE, start_new_session={own})\n"
    "child.stdout.readline()\n"
    "print(child.pid, flush=True)\n"
    "time.sleep(120)\n"
)
READY = IGNORE_TERM + "print('ready', flush=True); import time; time.sleep(120)"
needs_proc = pytest.mark.skipif(
    not Path("/proc/self/environ").exists(),
    reason="another process's environment is read from /proc",
)


def python(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def logs_in(folder: Path, *keys: str) -> dict[str, Path]:
    return {key: folder / f"{key}.log" for key in keys}


def alive(pid: int) -> bool:
    """The process exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        if Path("/proc").is_dir():
            return False
        try:  # no /proc: a zombie counts as alive here
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def test_a_command_that_ends_is_not_stopped_and_its_output_is_kept(
    tmp_path: Path,
) -> None:
    logs = logs_in(tmp_path, "a")
    ended = run_sessions({"a": python("print('hello')")}, logs, timeout_s=60)
    assert ended.returncodes == {"a": 0}
    assert ended.failed is None and ended.stopped == []
    assert ended.left == [] and ended.left_at_end == []
    assert logs["a"].read_text() == "hello\n"


def test_a_deadline_that_passes_stops_the_session(tmp_path: Path) -> None:
    start = time.monotonic()
    ended = run_sessions({"a": python(SLEEP)}, logs_in(tmp_path, "a"), timeout_s=1)
    assert time.monotonic() - start < 30  # not the 120 s it would sleep
    assert ended.stopped == ["a"] and ended.failed is None
    assert ended.returncodes == {"a": -signal.SIGTERM}
    assert not alive(ended.pids["a"])
    assert ended.left == [] and ended.left_at_end == []


def test_one_that_fails_stops_the_others_in_their_sessions(tmp_path: Path) -> None:
    commands = {"sleeps": python(SLEEP), "fails": python("raise SystemExit(3)")}
    start = time.monotonic()
    ended = run_sessions(commands, logs_in(tmp_path, *commands), timeout_s=60)
    assert time.monotonic() - start < 30
    assert ended.failed == "fails" and ended.stopped == ["sleeps"]
    assert ended.returncodes == {"sleeps": -signal.SIGTERM, "fails": 3}
    assert list(ended.pids) == ["sleeps", "fails"]  # started in the order given
    assert process_children(os.getpid()) == []


def test_a_command_that_ignores_sigterm_is_killed_after_the_grace(
    tmp_path: Path,
) -> None:
    logs = logs_in(tmp_path, "a")
    ended = run_sessions({"a": python(READY)}, logs, timeout_s=5, grace_s=1)
    assert logs["a"].read_text() == "ready\n", "SIGTERM came before it was ignored"
    assert ended.stopped == ["a"]
    assert ended.returncodes == {"a": -signal.SIGKILL}
    assert ended.left == [] and ended.left_at_end == []


@needs_proc
@pytest.mark.parametrize("own_session", [False, True])
def test_a_child_that_ignores_sigterm_is_stopped_and_nothing_is_left(
    tmp_path: Path, own_session: bool
) -> None:
    """In the command's session, the group's SIGKILL after the grace reaches the
    child; in a session of its own (as torchrun starts its ranks) only the mark finds
    it, once the command is gone, and it is killed by its pid."""
    code = WITH_CHILD.format(child=READY, own=own_session)
    logs = logs_in(tmp_path, "a")
    ended = run_sessions({"a": python(code)}, logs, timeout_s=5, grace_s=1)
    said = logs["a"].read_text().split()
    assert len(said) == 1, f"the deadline came before the child was ready: {said}"
    child = int(said[0])
    assert ended.stopped == ["a"] and ended.returncodes == {"a": -signal.SIGTERM}
    assert ended.left == ([child] if own_session else [])
    assert ended.left_at_end == []
    assert not alive(child)
    assert process_children(os.getpid()) == []


def test_each_command_leads_a_session_and_sees_the_mark_and_no_rank_variables(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RANK", "3")  # as inside a rank: not for the launcher
    monkeypatch.setenv("WORLD_SIZE", "4")
    keys = ["RANK", "WORLD_SIZE", sessions.MARK, "EXTRA"]
    show = f"import os; print(os.getsid(0) == os.getpid(), *map(os.getenv, {keys}))"
    logs = logs_in(tmp_path, "a", "b")
    commands = {"a": python(show), "b": python(show)}
    run_sessions(commands, logs, timeout_s=60, env={"EXTRA": "yes"}, mark="run42")
    for log in logs.values():
        assert log.read_text() == "True None None run42 yes\n"


@needs_proc
def test_left_behind_finds_only_the_marked_processes(tmp_path: Path) -> None:
    env = {**os.environ, sessions.MARK: "mine"}
    marked = subprocess.Popen(python(SLEEP), env=env, start_new_session=True)
    other = subprocess.Popen(python(SLEEP), env={**env, sessions.MARK: "another"})
    try:
        deadline = time.monotonic() + 30  # /proc shows the environment after exec
        while marked.pid not in sessions.left_behind("mine"):
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert sessions.left_behind("mine") == [marked.pid]
        assert sessions.sweep("mine") == []
        assert marked.wait(timeout=10) == -signal.SIGKILL
        assert other.poll() is None  # not this run's
    finally:
        for proc in (marked, other):
            proc.kill()
            proc.wait()


def test_without_proc_nothing_is_found_and_nothing_breaks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As on macOS: no /proc to read environments from."""
    monkeypatch.setattr(sessions, "PROC", tmp_path / "proc")
    assert sessions.left_behind("any") == []
    ended = run_sessions({"a": python(SLEEP)}, logs_in(tmp_path, "a"), timeout_s=1)
    assert ended.stopped == ["a"] and ended.left == [] and ended.left_at_end == []
    assert not alive(ended.pids["a"])


def test_the_command_is_torchrun_under_this_python() -> None:
    argv = sessions.torchrun_command("--standalone", "-m", "snippets")
    assert argv == [sys.executable, "-m", "torch.distributed.run", "--standalone",
                    "-m", "snippets"]  # fmt: skip
