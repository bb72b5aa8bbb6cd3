"""Shared fixtures: fresh results for the whole suite, and one strict site build."""

from __future__ import annotations

import functools
import http.server
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any, Callable
from urllib.parse import urlsplit

import pytest
from xdist.scheduler import LoadFileScheduling

# First: on a CPU, importing snippets picks Triton's interpreter before triton loads.
import snippets  # noqa: F401

REPO = Path(__file__).resolve().parents[1]


def load_hook(name: str):
    """``hooks/<name>.py`` as mkdocs loads it: its folder on ``sys.path`` while it runs,
    so that it can import the modules beside it."""
    import importlib.util

    path = REPO / "hooks" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"{name}_hook", path)
    hook = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(path.parent))
    try:
        spec.loader.exec_module(hook)
    finally:
        sys.path.remove(str(path.parent))
    return hook


def exit_status(entry: Callable[[list[str]], Any], argv: list[str]) -> Any:
    """``entry(argv)``'s exit status: what it returns, or the code it exits with
    (argparse's refusals and its ``--help`` exit, as they do in the process)."""
    try:
        return entry(argv)
    except SystemExit as exc:
        return exc.code


def refusal(status: Any, out: str, err: str, *, nothing_on_stdout: bool = False) -> str:
    """What a refusal already run left: exit status 2 and exactly one line on stderr,
    no traceback anywhere; that line, without its newline."""
    assert status == 2, f"exit status {status}:\n{err}"
    assert "Traceback" not in out + err, out + err
    assert err.endswith("\n") and err.count("\n") == 1, err
    assert not nothing_on_stdout or out == "", out
    return err[:-1]


def refused(
    argv: list[str],
    capfd: pytest.CaptureFixture[str],
    env: dict[str, str] | None = None,
    *,
    nothing_on_stdout: bool = False,
    entry: Callable[[list[str]], Any] | None = None,
) -> str:
    """``python -m snippets *argv`` run in this process, as a refusal: exit status 2
    and exactly one line on stderr, no traceback anywhere; that line, without its
    newline. ``env`` is set for the call alone (the ranks it starts inherit it).

    ``entry`` runs instead of that ``main`` where a test holds one part of the command
    line to the rule: a parser's ``parse_args``, a command's own ``main(argv)``, one
    module's options (``lambda a: snippet_options(module, a, prog)``). It is called
    with ``argv`` alone; what it returns or exits with is the exit status.

    ``capfd``, not ``capsys``: ranks write to the launcher's file descriptors, so only
    a capture of those sees a line a rank adds. The suite keeps one test of the real
    process (tests/core/test_cli.py); the rest pay no interpreter and no torch import.
    tests/test_refusals.py holds every other test file to these helpers.
    """
    if entry is None:
        from snippets.__main__ import main as entry

    capfd.readouterr()  # what the test printed before is not the refusal's
    with pytest.MonkeyPatch.context() as patch:
        for name, value in (env or {}).items():
            patch.setenv(name, value)
        status = exit_status(entry, argv)
    out, err = capfd.readouterr()
    return refusal(status, out, err, nothing_on_stdout=nothing_on_stdout)


def _live_processes() -> dict[int, tuple[int, bytes]]:
    """pid -> (parent pid, command line) for every process that is not a zombie."""
    table = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            cmdline = (stat.parent / "cmdline").read_bytes()
        except OSError:
            continue
        if fields[0] != "Z":
            table[int(stat.parent.name)] = (int(fields[1]), cmdline)
    return table


def alive(pid: int) -> bool:
    """The process runs (a zombie has ended, though its parent has not yet read it)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def process_children(pid: int) -> list[int]:
    """Live ranks that ``pid`` started: its children, and the children of its fork
    server (ranks are forked there). multiprocessing's own helpers are not ranks: the
    resource tracker and the fork server live as long as the parent, by design."""
    table = _live_processes()

    def children(of: int) -> list[int]:
        return [p for p, (parent, _) in table.items() if parent == of]

    found = []
    for child in children(pid):
        cmdline = table[child][1]
        if b"resource_tracker" in cmdline:
            continue
        if b"multiprocessing.forkserver" in cmdline:
            found.extend(children(child))
        else:
            found.append(child)
    return found


def _shared(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder every test process of this run sees: under pytest-xdist each worker has
    its own base temp, and their common parent belongs to this run alone."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def _once(tmp_path_factory: pytest.TempPathFactory, name: str, make) -> Path:
    """``make(folder)`` run by the first test process that asks; the others wait for
    it and reuse the folder, so a worker never repeats nor races another's work."""
    from filelock import FileLock

    shared = _shared(tmp_path_factory)
    folder, done = shared / name, shared / f"{name}.done"
    with FileLock(str(shared / f"{name}.lock")):
        if not done.exists():
            folder.mkdir(exist_ok=True)
            make(folder)
            done.touch()
    return folder


# A test that reads results/ may first wait for make test's run-all, which runs beside
# the suite, then for the one site build: the per-test timeout counts from its call,
# and these waits have their own bounds (run-all stops each snippet at its own).
WAITS = {"results_dir", "built_site"}
RUN_ALL_S, BUILD_S = 3600, 900


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    waits: dict[str, int] = {}  # file → 1 if a test reads results/, 2 if the site
    for item in items:
        needs = WAITS & set(getattr(item, "fixturenames", ()))
        if needs:
            timeout = item.get_closest_marker("timeout")
            seconds = timeout.args[0] if timeout and timeout.args else 300
            item.add_marker(pytest.mark.timeout(seconds, func_only=True), append=False)
            file = item.nodeid.split("::")[0]
            waits[file] = max(waits.get(file, 0), 2 if "built_site" in needs else 1)
    # Files that wait go last, the site's after the rest, so that no worker sits waiting
    # for run-all while tests that need nothing are left; within each of the three, a
    # file marked long (minutes) first, so the others fill in around it. The sort is
    # stable, and the Makefile keeps xdist from reordering files by their test counts.
    long = {i.nodeid.split("::")[0] for i in items if i.get_closest_marker("long")}

    def order(item: pytest.Item) -> tuple[int, bool]:
        file = item.nodeid.split("::")[0]
        return waits.get(file, 0), file not in long

    items.sort(key=order)


# Each test of these files goes to the next free process, not the whole file to one:
# the axe slices are minutes each, and a worker left alone with all four of them
# would end the suite a core idle.
SPREAD = {"tests/site/test_accessibility_browser.py"}


class WholeFiles(LoadFileScheduling):
    """--dist loadfile (a file's fixtures launch ranks once), except SPREAD."""

    def _split_scope(self, nodeid: str) -> str:
        file = nodeid.split("::", 1)[0]
        return nodeid if file in SPREAD else file


def pytest_xdist_make_scheduler(config, log):
    return WholeFiles(config, log) if config.getvalue("dist") == "loadfile" else None


@pytest.fixture(scope="session")
def results_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """results/ brought up to date by run-all (cached: unchanged code is not rerun)."""

    def run_all(_: Path) -> None:
        proc = subprocess.run(
            [sys.executable, "-m", "snippets", "run-all"],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=RUN_ALL_S,
        )
        assert proc.returncode == 0, f"run-all failed:\n{proc.stdout}\n{proc.stderr}"

    _once(tmp_path_factory, "run-all", run_all)
    return REPO / "results"


@pytest.fixture(scope="session")
def built_site(results_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One strict build of the site for every site test (and every worker)."""

    def build(out: Path) -> None:
        env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
        proc = subprocess.run(
            [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(out)],
            cwd=REPO,
            capture_output=True,
            text=True,
            env=env,
            timeout=BUILD_S,
        )
        tail = proc.stderr[-4000:]
        assert proc.returncode == 0, f"mkdocs build --strict failed:\n{tail}"

    return _once(tmp_path_factory, "site", build)


@pytest.fixture(scope="session")
def tiny():
    """(model, example args, annotated graph) of the shared tiny GPT, exported once for
    every viewer test (an export costs seconds)."""
    from snippets.viewer.graph_export import export_graph
    from snippets.viewer.model_viewer import tiny_gpt, tiny_gpt_inputs
    from snippets.viewer.parallel_overlay import annotate

    model, args = tiny_gpt(), tiny_gpt_inputs()
    return model, args, annotate(export_graph(model, args))


@pytest.hookimpl(tryfirst=True)
def pytest_report_to_serializable(config, report) -> None:
    """A failed note block (README.md, docs/) reports its exception's first argument,
    which is a number when a command exits non-zero; a pytest-xdist worker must hand
    its report over as text, or the whole run stops on an internal error."""
    if isinstance(getattr(report, "longrepr", None), (int, float)):
        report.longrepr = f"{report.nodeid}: the command exited with {report.longrepr}"


# The browser tests' fixtures: the built site served over loopback HTTP (search and
# workers fail on file://), Debian's Chromium driven by Playwright (never a download),
# and pages that refuse and record every request to another host.
FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def chromium() -> str:
    for name in (os.environ.get("CHROMIUM"), "chromium", "chromium-browser"):
        if name and shutil.which(name):
            return shutil.which(name)
    pytest.skip("no Chromium here (CI installs Debian's chromium package)")


class Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:  # one line per request would drown the report
        pass


@pytest.fixture(scope="module")
def served(built_site: Path):
    handler = functools.partial(Quiet, directory=str(built_site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=chromium(), args=FLAGS)
        yield b
        b.close()


@pytest.fixture()
def open_page(browser):
    """``open_page(width=…, scheme=…)``: a page whose every request to another host
    is refused and recorded (``.foreign``), with its requests and its errors."""
    contexts = []

    def make(width: int = 1280, scheme: str = "light", javascript: bool = True):
        context = browser.new_context(
            viewport={"width": width, "height": 900},
            color_scheme=scheme,
            java_script_enabled=javascript,
        )
        contexts.append(context)
        p = context.new_page()
        p.foreign, p.requested, p.errors = [], [], []

        def route(r):
            url = r.request.url
            p.requested.append(url)
            if (
                url.startswith(("data:", "blob:"))
                or urlsplit(url).hostname == "127.0.0.1"
            ):
                return r.continue_()
            p.foreign.append(url)
            return r.abort()

        context.route("**/*", route)
        p.on("pageerror", lambda e: p.errors.append(str(e)))
        p.on(
            "console",
            lambda m: p.errors.append(m.text) if m.type == "error" else None,
        )
        return p

    yield make
    for context in contexts:
        context.close()


@pytest.fixture()
def page(open_page):
    return open_page()
