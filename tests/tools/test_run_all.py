"""run_all: the results folder is checked before anything runs; timed snippets run
alone; a snippet that reads another's results runs after it, reruns when it does, is
not run when it fails, and finds those results in the folder run-all writes to; with
--keep-going a failure leaves a placeholder where a note includes its results, and
nothing else changes."""

from __future__ import annotations

import argparse
import itertools
import json
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import markdown
import pytest
from conftest import REPO, process_children, refused

from snippets.__main__ import main as snippets_main
from snippets.core import results
from snippets.core.errors import UsageError
from snippets.core.runtime import Spec
from snippets.tools import registry, run_all, run_order


def test_writable_folder_is_made_and_left_empty(tmp_path: Path) -> None:
    target = tmp_path / "a" / "b"
    run_all.check_writable(target)
    assert target.is_dir() and list(target.iterdir()) == []


def test_a_file_in_the_way_is_a_usage_error(tmp_path: Path) -> None:
    blocker = tmp_path / "results"
    blocker.write_text("not a folder")
    with pytest.raises(UsageError, match="cannot write results to .*--results DIR"):
        run_all.check_writable(blocker / "inner")
    assert blocker.read_text() == "not a folder"


def test_unknown_only_name_fails_before_running(tmp_path: Path) -> None:
    opts = argparse.Namespace(
        results=str(tmp_path),
        backend="gloo",
        only=["no_such_snippet_xyz"],
        force=False,
        per_snippet_timeout=5.0,
        jobs=2,
    )
    with pytest.raises(UsageError):
        run_all.run_all(opts)
    assert list(tmp_path.iterdir()) == []


def test_timed_snippets_run_alone_and_the_rest_side_by_side(
    tmp_path: Path, monkeypatch, capsys
) -> None:
    """Two timed and four untimed stand-ins: a timed one never has company, untimed
    ones do overlap, and the report is in name order whatever order they finished.
    Each is told how many share the cores: one for a timed one, --jobs for the rest."""
    names = ["a_timed", "b", "c", "d_timed", "e", "f"]
    entries = {
        n: SimpleNamespace(name=n, spec=Spec(summary=n, timed=n.endswith("_timed")))
        for n in names
    }
    running: set[str] = set()
    seen: dict[str, set[str]] = {}
    lock = threading.Lock()

    told: dict[str, int] = {}

    def fake_run_one(entry, results_dir, backend, timeout_s, together=1):
        told[entry.name] = together
        with lock:
            running.add(entry.name)
        time.sleep(0.3)
        with lock:
            seen[entry.name] = set(running)
            running.discard(entry.name)
        return True, "0.3 s"

    monkeypatch.setattr(run_all.registry, "snippets_by_name", lambda: entries)
    monkeypatch.setattr(run_all, "run_one", fake_run_one)
    opts = argparse.Namespace(
        results=str(tmp_path),
        backend="gloo",
        only=None,
        force=True,
        per_snippet_timeout=5.0,
        jobs=2,
    )
    assert run_all.run_all(opts) == 0
    assert seen["a_timed"] == {"a_timed"} and seen["d_timed"] == {"d_timed"}
    assert any(len(seen[n]) == 2 for n in "bcef")  # side by side
    assert told == {n: 1 if n.endswith("_timed") else 2 for n in names}
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[1].rstrip(":") for line in lines] == names


@pytest.mark.parametrize(
    "asked, cores, together, want", [("", 2, 2, "1"), ("", 8, 2, "4"), ("1", 8, 1, "1")]
)
def test_a_snippet_takes_its_share_of_the_cores_with_those_beside_it(
    tmp_path: Path, monkeypatch, asked: str, cores: int, together: int, want: str
) -> None:
    """The child is started with OMP_NUM_THREADS at its share of the cores, never more
    than was asked: a thread per core each, snippets beside each other (or beside the
    suite) spin waiting for threads another process has taken the core from."""
    seen: dict[str, str] = {}

    class Refused:
        def __init__(self, argv, env, **_):
            seen.update(env)
            self.pid, self.returncode = 0, 1

        def communicate(self, timeout=None):
            return "", None

    monkeypatch.setattr(run_all.ranks.os, "cpu_count", lambda: cores)
    monkeypatch.setenv("OMP_NUM_THREADS", asked)
    monkeypatch.setattr(run_all.subprocess, "Popen", Refused)
    assert run_all.run_child("x", "gloo", 5.0, tmp_path, together) == (
        None,
        "exit status 1",
    )
    assert seen["OMP_NUM_THREADS"] == want


def test_a_second_run_all_on_one_folder_waits_for_the_first(
    tmp_path: Path, monkeypatch, capsys
) -> None:
    """While another run-all holds the folder, a second one says so and runs nothing;
    once it is free, it runs (make test's run-all and the suite's share results/)."""
    from filelock import FileLock

    ran: list[str] = []
    monkeypatch.setattr(run_all.registry, "snippets_by_name", lambda: stand_ins(a=()))
    monkeypatch.setattr(
        run_all, "run_one", lambda entry, *_: (ran.append(entry.name), (True, "0 s"))[1]
    )
    done: list[int] = []
    with FileLock(str(run_all.lock_path(tmp_path))):
        with pytest.raises(UsageError, match="nope"):  # bad input does not wait
            run_all.run_all(opts_for(tmp_path, only=["nope"]))
        second = threading.Thread(
            target=lambda: done.append(run_all.run_all(opts_for(tmp_path, force=True)))
        )
        second.start()
        time.sleep(1.0)
        assert ran == [] and done == []
        assert "waiting for the run-all writing" in capsys.readouterr().err
    second.join(timeout=30)
    assert done == [0] and ran == ["a"]


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="reads /proc")
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_stopped_run_all_leaves_no_snippet_running(tmp_path: Path, signum) -> None:
    """A snippet runs in its own session, out of reach of run-all's signals: stopped
    (make's kill, Ctrl-C), run-all stops it and its ranks before it leaves."""
    argv = [sys.executable, "-m", "snippets", "run-all", "--force"]
    argv += ["--only", "same_bits", "--results", str(tmp_path)]
    proc = subprocess.Popen(argv, cwd=REPO, stderr=subprocess.PIPE, text=True)
    deadline, runner = time.monotonic() + 60, []
    while not runner and time.monotonic() < deadline:
        time.sleep(0.2)
        runner = process_children(proc.pid)
    assert runner, "the snippet never started"
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 128 + signum and "stopped by signal" in err
    time.sleep(0.5)
    for pid in runner:
        state = Path(f"/proc/{pid}/stat")
        assert (
            not state.exists() or state.read_text().rsplit(")", 1)[1].split()[0] == "Z"
        )


def opts_for(results: Path, **changes) -> argparse.Namespace:
    base = dict(
        results=str(results),
        backend="gloo",
        only=None,
        force=False,
        per_snippet_timeout=5.0,
        jobs=2,
        keep_going=False,
    )
    return argparse.Namespace(**{**base, **changes})


def stand_ins(**reads: tuple[str, ...]) -> dict[str, SimpleNamespace]:
    """Snippets named by the keywords, each reading the ones its tuple names; a name
    ending in _timed reports times."""
    return {
        n: SimpleNamespace(
            name=n,
            path=Path(n),
            spec=Spec(summary=n, timed=n.endswith("_timed"), reads=r),
        )
        for n, r in sorted(reads.items())
    }


def test_a_reader_never_keeps_a_result_its_producer_has_replaced(
    tmp_path: Path, monkeypatch
) -> None:
    """The cost_model case: a timed producer whose every run gives a new number and an
    untimed reader that copies it. The oracle is the producer's file itself: after
    every run-all the reader's result holds what that file holds now."""
    entries = stand_ins(fit_timed=(), page=("fit_timed",), other=())
    monkeypatch.setattr(run_all.registry, "snippets_by_name", lambda: entries)
    edits = {"fit_timed": ""}  # an edit to the producer's code changes its hash
    monkeypatch.setattr(
        run_all.results,
        "code_hash",
        lambda path, extra: f"{path}:{extra}" + edits.get(str(path), ""),
    )
    ran: list[str] = []
    runs = itertools.count()  # every run of the producer gives a new number

    def fake_child(name, backend, timeout_s, results_dir, together=1):
        ran.append(name)
        value = {"run": next(runs)}
        if name == "page":  # reads the producer's results, as the explorer does
            value = {"seen": run_all.results.read(tmp_path, "fit_timed")["result"]}
        seen = {"device": "cpu", "backend": backend, "world_size": 1}
        return {"result": value, **seen}, "ok\n"

    monkeypatch.setattr(run_all, "run_child", fake_child)

    def run(**changes) -> list[str]:
        ran.clear()
        assert run_all.run_all(opts_for(tmp_path, **changes)) == 0
        return list(ran)

    def page_is_fresh() -> bool:
        page = run_all.results.read(tmp_path, "page")["result"]["seen"]
        return page == run_all.results.read(tmp_path, "fit_timed")["result"]

    assert run() == ["fit_timed", "other", "page"] and page_is_fresh()
    assert run() == []  # nothing changed: all cached
    assert run(only=["fit_timed"], force=True) == ["fit_timed"]
    assert not page_is_fresh()  # --only left the page out
    assert run() == ["page"] and page_is_fresh()  # the new fit on file reruns it
    edits["fit_timed"] = "+an edit"
    assert run() == ["fit_timed", "page"] and page_is_fresh()  # both, in order
    assert run(only=["page", "fit_timed"]) == []  # an unchanged producer: cached


def test_a_reader_starts_after_its_producers_and_timed_ones_stay_alone(
    tmp_path: Path, monkeypatch, capsys
) -> None:
    """Every kind of edge: untimed → timed (a_timed reads b), timed → untimed (c reads
    d_timed), untimed → untimed (e reads c), and ones that read nothing."""
    entries = stand_ins(
        a_timed=("b",), b=(), c=("d_timed",), d_timed=(), e=("c",), f=(), g_timed=()
    )
    spans: dict[str, tuple[float, float]] = {}

    def fake_run_one(entry, results_dir, backend, timeout_s, together=1):
        start = time.monotonic()
        time.sleep(0.1)
        spans[entry.name] = (start, time.monotonic())
        return True, "0.1 s"

    monkeypatch.setattr(run_all.registry, "snippets_by_name", lambda: entries)
    monkeypatch.setattr(run_all, "run_one", fake_run_one)
    assert run_all.run_all(opts_for(tmp_path, force=True)) == 0
    assert set(spans) == set(entries)

    def overlap(x: str, y: str) -> bool:
        return spans[x][0] < spans[y][1] and spans[y][0] < spans[x][1]

    for name, entry in entries.items():
        for producer in entry.spec.reads:
            assert spans[producer][1] <= spans[name][0], f"{name} before {producer}"
        if entry.spec.timed:
            assert not any(overlap(name, o) for o in entries if o != name), name
    assert any(overlap(x, y) for x in "bcef" for y in "bcef" if x < y)
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[1].rstrip(":") for line in lines] == sorted(entries)


@pytest.mark.parametrize(
    ("reads", "says"),
    [
        (
            {"page": ("fit_tmed",)},
            "page: SPEC reads the results of 'fit_tmed', "
            "which is no snippet; did you mean 'fit_timed'?",
        ),
        ({"page": ("page",)}, "page: SPEC reads the results of itself"),
        ({"page": "fit_timed"}, "page: SPEC reads='fit_timed' must be a tuple"),
        (
            {"page": ("fit_timed",), "fit_timed": ("other",), "other": ("page",)},
            "in a circle: fit_timed reads other reads page reads fit_timed;",
        ),
    ],
)
def test_a_bad_reads_is_one_line_and_exit_2_before_anything_runs(
    reads, says, tmp_path: Path, monkeypatch, capfd
) -> None:
    entries = stand_ins(**{"fit_timed": (), "page": (), "other": (), **reads})
    monkeypatch.setattr(run_all.registry, "snippets_by_name", lambda: entries)
    monkeypatch.setattr(run_all, "run_one", lambda *a: pytest.fail("it ran"))
    line = refused(["run-all", "--results", str(tmp_path), "--backend", "gloo"], capfd)
    assert line.startswith("error: ") and says in line
    assert list(tmp_path.iterdir()) == []


def test_the_real_snippets_declare_the_results_they_read() -> None:
    """Any snippet whose code names another's results file (``NAME.json``,
    ``results/NAME.``) says so in its SPEC (a snippet may also read what its SPEC
    declares by looping over it), and its producer comes first."""
    entries = registry.snippets_by_name()
    order = run_order.producers_first(entries)
    for name, entry in entries.items():
        text = entry.path.read_text(encoding="utf-8")
        named = {
            other
            for other in entries
            if other != name
            and re.search(rf"\b{other}\.json\b|results/{other}\.", text)
        }
        assert named <= set(entry.spec.reads), name
        assert all(order.index(p) < order.index(name) for p in entry.spec.reads)
    assert entries["cost_model_explorer"].spec.reads == ("cost_model",)


def test_a_reader_of_a_failed_producer_is_not_run_and_keeps_its_results(
    tmp_path: Path, monkeypatch, capsys
) -> None:
    """fit_timed fails after a good run-all: page (reads it) and deep (reads page) do
    not run, their files are as they were, the summary names fit_timed for both and
    the note embedding each, and run-all exits 1; once fit_timed passes, both rerun."""
    entries = stand_ins(fit_timed=(), page=("fit_timed",), deep=("page",), other=())
    monkeypatch.setattr(run_all.registry, "snippets_by_name", lambda: entries)
    monkeypatch.setattr(
        run_all.registry, "notes_embedding", lambda name: [Path(f"docs/{name}.md")]
    )
    edits = {"fit_timed": ""}
    monkeypatch.setattr(
        run_all.results,
        "code_hash",
        lambda path, extra: f"{path}:{extra}" + edits.get(str(path), ""),
    )
    ran: list[str] = []
    broken = {"fit_timed": False}

    def fake_child(name, backend, timeout_s, results_dir, together=1):
        ran.append(name)
        if broken.get(name):
            return None, f"timed out after {timeout_s:.0f} s"
        seen = {"device": "cpu", "backend": backend, "world_size": 1}
        return {"result": {"run": len(ran)}, **seen}, "ok\n"

    monkeypatch.setattr(run_all, "run_child", fake_child)

    def files() -> dict[str, bytes]:
        return {p.name: p.read_bytes() for p in sorted(tmp_path.iterdir())}

    assert run_all.run_all(opts_for(tmp_path)) == 0
    before, _ = files(), capsys.readouterr()
    ran.clear()
    broken["fit_timed"], edits["fit_timed"] = True, "+a bad edit"
    assert run_all.run_all(opts_for(tmp_path)) == 1
    out, err = capsys.readouterr()
    assert ran == ["fit_timed"] and files() == before
    lines = {line.split()[1].rstrip(":"): line for line in out.splitlines()}
    assert lines["fit_timed"].startswith("FAILED  fit_timed: timed out after 5 s")
    assert lines["page"] == (
        "SKIPPED page: not run: fit_timed failed (it reads its results)"
    )
    assert lines["deep"] == (
        "SKIPPED deep: not run: fit_timed failed (it reads its results via page)"
    )
    assert lines["other"] == "cached  other"
    assert err.count("\n") == 1 and err.startswith("error: 1 snippet(s) failed, 2 not")
    assert "page (docs/page.md): not run: fit_timed failed" in err
    assert "deep (docs/deep.md): not run: fit_timed failed" in err
    ran.clear()
    broken["fit_timed"] = False
    assert run_all.run_all(opts_for(tmp_path)) == 0
    assert ran == ["fit_timed", "page", "deep"]
    assert files()["page.json"] != before["page.json"]


def test_a_snippet_finds_the_results_it_reads_in_the_results_folder(
    tmp_path: Path, capsys
) -> None:
    """The real explorer under ``run-all --results DIR``: it starts its sliders at the
    fit in DIR/cost_model.json (not the repo's results/), the file its hash holds."""
    fit = {"alpha_s": 1.25e-4, "beta_s_per_byte": 4e-10, "gamma_s_per_byte": 2e-11}
    (tmp_path / "cost_model.json").write_text(json.dumps({"result": fit}))
    argv = ["run-all", "--results", str(tmp_path), "--backend", "gloo"]
    assert snippets_main(argv + ["--only", "cost_model_explorer"]) == 0
    record = results.read(tmp_path, "cost_model_explorer")
    assert record["result"]["fitted"] == {
        "alpha": fit["alpha_s"],
        "beta": fit["beta_s_per_byte"],
        "gamma": fit["gamma_s_per_byte"],
    }
    assert "α = 125.0 µs" in record["output"]
    entry = registry.snippet("cost_model_explorer")
    key = results.cache_key(entry.path, "gloo", tmp_path, ("cost_model",))
    assert record["hash"] == key
    capsys.readouterr()
    assert snippets_main(argv + ["--only", "cost_model_explorer"]) == 0
    assert capsys.readouterr().out.strip() == "cached  cost_model_explorer"


NOTE = """# A note

--8<-- "results/fit_timed.md"

--8<-- "results/fit_timed.steps.md"

--8<-- "results/page.md"

--8<-- "results/other.md"
"""


@pytest.fixture
def broken_producer(tmp_path: Path, monkeypatch):
    """fit_timed (its table included by the note, another part not), page reading
    it, and other, which passes; a note in a docs folder of its own includes parts of
    all three. Returns (results folder, ran, broken): set broken["fit_timed"] to
    make it fail."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "note.md").write_text(NOTE, encoding="utf-8")
    monkeypatch.setattr(run_all.registry, "DOCS_DIR", docs)
    entries = stand_ins(fit_timed=(), page=("fit_timed",), other=())
    monkeypatch.setattr(run_all.registry, "snippets_by_name", lambda: entries)
    ran: list[str] = []
    broken = {"fit_timed": False}  # broken by an edit: its code hash changes
    monkeypatch.setattr(
        run_all.results,
        "code_hash",
        lambda path, extra: f"{path}:{extra}:{broken.get(str(path))}",
    )

    def fake_child(name, backend, timeout_s, results_dir, together=1):
        ran.append(name)
        if broken.get(name):
            return None, "AssertionError: a law broke at `x[3]` <here>"
        parts = {"steps": "| a |\n|---|\n| 1 |", "unused": "not in a note"}
        value = {"run": len(ran), "markdown": parts if name == "fit_timed" else {}}
        return {"result": value, "backend": backend, "world_size": 1}, "ok\nline 2\n"

    monkeypatch.setattr(run_all, "run_child", fake_child)
    folder = tmp_path / "results"
    return folder, ran, broken


def run_cli(folder: Path, *extra: str) -> int:
    argv = ["run-all", "--results", str(folder), "--backend", "gloo", *extra]
    return snippets_main(argv)


def rendered(folder: Path) -> str:
    """The note as the site's Markdown renders it (pymdownx.snippets, admonitions),
    its includes checked."""
    return markdown.markdown(
        NOTE,
        extensions=["admonition", "pymdownx.snippets"],
        extension_configs={
            "pymdownx.snippets": {
                "base_path": [str(folder.parent)],
                "check_paths": True,
            }
        },
    )


def test_keep_going_writes_a_placeholder_where_a_note_includes_a_failure(
    broken_producer, capsys
) -> None:
    folder, ran, broken = broken_producer
    broken["fit_timed"] = True
    assert run_cli(folder, "--keep-going") == 0
    out, err = capsys.readouterr()
    assert sorted(p.name for p in folder.iterdir()) == [
        "fit_timed.md",
        "fit_timed.steps.md",  # not fit_timed.unused.md: no note includes it
        "other.json",
        "other.md",
        "page.md",
    ]  # and no fit_timed.json or page.json: nothing looks like a good run
    assert "FAILED  fit_timed: AssertionError" in out
    assert err.startswith("kept going: 1 snippet(s) failed, 1 not run: fit_timed (")
    assert "page (note.md): not run: fit_timed failed" in err
    html = " ".join(rendered(folder).split())
    boxes = re.findall(r'<div class="admonition failure">(.*?)</div>', html, re.S)
    assert len(boxes) == 3  # fit_timed twice (its output, its table), page once
    titles = [re.search(r'<p class="admonition-title">(.*?)</p>', b)[1] for b in boxes]
    assert titles == [
        "fit_timed did not run on this machine",
        "fit_timed did not run on this machine",
        "page did not run on this machine",
    ]
    assert "<code>python -m snippets run fit_timed</code>" in boxes[0]
    assert "<code>AssertionError: a law broke at `x[3]` &lt;here&gt;</code>" in boxes[0]
    text = (folder / "page.md").read_text(encoding="utf-8")
    assert text.endswith(f"\n{run_all.PLACEHOLDER}\n")  # no padding after the marker
    page = markdown.markdown(text, extensions=["admonition"])
    page = " ".join(page.split())  # as a browser shows it: a break is a space
    assert "<code>python -m snippets run page</code>" in page
    assert "<code>not run: fit_timed failed (it reads its results)</code>" in page
    ran.clear()
    assert run_cli(folder) == 1  # strict: a placeholder is no cached run
    assert ran == ["fit_timed"]
    assert capsys.readouterr().err.startswith("error: 1 snippet(s) failed, 1 not run")
    broken["fit_timed"] = False
    ran.clear()
    assert run_cli(folder) == 0
    assert ran == ["fit_timed", "page"] and "failure" not in rendered(folder)
    assert not [p for p in folder.iterdir() if run_all.is_placeholder(p)]
    ran.clear()
    assert run_cli(folder) == 0 and ran == []  # cached again


def test_keep_going_leaves_a_good_run_as_it_was(broken_producer, capsys) -> None:
    folder, ran, broken = broken_producer
    assert run_cli(folder) == 0
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    broken["fit_timed"] = True
    for extra in (["--keep-going"], []):  # lenient, then strict
        ran.clear()
        capsys.readouterr()
        assert run_cli(folder, *extra) == (0 if extra else 1)
        assert ran == ["fit_timed"]  # page not run, other cached
        assert {p.name: p.read_bytes() for p in folder.iterdir()} == before
    ran.clear()
    assert run_cli(folder, "--keep-going") == 0
    err = capsys.readouterr().err
    assert "placeholders in" in err and err.rstrip().endswith("is there)")
