"""`python -m snippets`: what a learner types, and what bad input gets back."""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys

import pytest
from conftest import REPO, exit_status, refused

from snippets.__main__ import build_parser, main
from snippets.core import cli as cli_helpers
from snippets.tools import registry


def cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "snippets", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def in_process(capfd, *args: str) -> tuple[int, str, str]:
    """``python -m snippets *args`` run in this process: (exit status, stdout, stderr).
    What it runs in a process of its own (ranks, run-all's snippets) writes to the
    file descriptors, which ``capfd`` reads."""
    capfd.readouterr()
    status = main(list(args))
    out, err = capfd.readouterr()
    return status, out, err


def listed(capfd, *args: str) -> str:
    status, out, err = in_process(capfd, "list", *args)
    assert status == 0, err
    return out


def test_list_shows_every_snippet_with_its_note(capfd) -> None:
    out = listed(capfd)
    for name, entry in registry.snippets_by_name().items():
        line = next(line for line in out.splitlines() if line.split()[0] == name)
        assert str(entry.spec.world_size) in line.split()
        for note in registry.notes_embedding(name):
            assert str(note) in line


def test_list_says_how_many_building_blocks_and_lists_them_on_request(capfd) -> None:
    import importlib

    # the oracle: every module imported and asked, not the import graph
    blocks = []
    for dotted in registry.module_names():
        module = importlib.import_module(dotted)
        if dotted.startswith("snippets.core.") or hasattr(module, "BENCH"):
            continue
        if not hasattr(module, "SPEC"):
            blocks.append(dotted.rsplit(".", 1)[1])
    assert "tensor_parallel" in blocks and "tp_gpt" not in blocks
    out = listed(capfd)
    assert f"\n{len(blocks)} more modules are building blocks, not snippets" in out
    assert "python -m snippets list --blocks" in out
    rows = listed(capfd, "--blocks").splitlines()
    assert sorted(line.split()[0] for line in rows[1:]) == sorted(blocks)
    row = next(line for line in rows if line.split()[0] == "tensor_parallel")
    runs_in = row.split(None, 1)[1].split(", ")
    assert runs_in[0] == "tp_gpt" and "sequence_parallel" in runs_in
    for name in runs_in:  # each imports it itself: read from its source
        source = registry.snippet(name).path.read_text(encoding="utf-8")
        assert "tensor_parallel import" in source, name


def test_run_prints_the_self_check(capfd) -> None:
    status, out, err = in_process(capfd, "run", "process_groups", "-n", "2")
    assert status == 0, err
    assert "world: 2 ranks" in out


@pytest.mark.parametrize(
    "args, says",
    [
        (["run", "no_such_snippet"], "unknown snippet 'no_such_snippet'"),
        (["run", "process_grups"], "did you mean 'process_groups'"),
        (["run", "process_groups", "-n", "0"], "-n/--nproc: must be at least 1"),
        (["run", "process_groups", "-n", "two"], "expected a whole number"),
        (["run", "process_groups", "--timeout", "0"], "greater than 0"),
        (["run-all", "--per-snippet-timeout", "-5"], "greater than 0"),
        (
            ["run", "process_groups", "--backend", "carrier-pigeon"],
            "unknown backend 'carrier-pigeon'",
        ),
        (["run", "process_groups", "--backend", "nccl", "-n", "64"], "nccl"),
        (["run", "process_groups", "--no-such-option"], "unrecognized arguments"),
        (["run-all", "--only", "nope"], "unknown snippet 'nope'"),
        (["run", "tensor_parallel"], "python -m snippets run tp_gpt"),
        (["run", "runtime"], "runtime is shared machinery in snippets.core"),
        (["run", "viewer_bench"], "python -m snippets bench viewer"),
        (["bench", "nope"], "unknown benchmark 'nope'"),
        (["frobnicate"], "invalid choice"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args: list[str], says: str, capfd) -> None:
    line = refused(args, capfd)
    assert line.startswith("error: ") and says in line, line


def test_the_real_process_refuses_in_one_line_and_exit_2() -> None:
    """The one refusal run as a learner runs it: a fresh ``python -m snippets``
    process, its exit status and its whole stderr (the rest run in this process)."""
    proc = cli("run", "process_grups")
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("error: unknown snippet 'process_grups'")
    assert "did you mean 'process_groups'" in proc.stderr
    assert proc.stderr.count("\n") == 1 and proc.stdout == ""


# The list of inputs that once gave a traceback; each is refused by its parser.
@pytest.mark.parametrize(
    "args",
    [
        ["run", "ring_allreduce", "--timeout", "-1"],
        ["run", "p2p_bandwidth", "--size-mib", "0"],
        ["run", "p2p_bandwidth", "--iters", "0"],
        ["run", "nvlink_vs_pcie", "--iters", "0"],
        ["run", "allreduce_bench", "--target-mib", "-1"],
        ["bench", "allreduce", "--iters", "0"],
    ],
)
def test_bad_numbers_are_refused_by_the_parser(args: list[str], capfd) -> None:
    assert refused(args, capfd).startswith("error: argument ")


@pytest.mark.parametrize(
    "check, good, bad",
    [
        (cli_helpers.positive_int, {"1": 1, "12": 12}, ["0", "-3", "1.5", "x", ""]),
        (cli_helpers.nonnegative_int, {"0": 0, "7": 7}, ["-1", "2.0", "seven"]),
        (cli_helpers.positive_float, {"0.5": 0.5, "3": 3.0}, ["0", "-1", "nan", "inf"]),
        (cli_helpers.nonnegative_float, {"0": 0.0, "2.5": 2.5}, ["-0.1", "nan", "x"]),
    ],
)
def test_validators_take_good_numbers_and_refuse_bad(check, good, bad) -> None:
    for text, value in good.items():
        assert check(text) == value and type(check(text)) is type(value)
    for text in bad:
        with pytest.raises(argparse.ArgumentTypeError):
            check(text)


def numeric_options_without_a_validator(parser: argparse.ArgumentParser) -> list[str]:
    """Options (subcommands' too) that take a number the parser does not check: a bare
    ``type=int``/``float``, or no type at all where the default is a number."""
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                found += numeric_options_without_a_validator(sub)
            continue
        name = "/".join(action.option_strings) or action.dest
        takes_value = action.nargs != 0
        numeric_default = isinstance(action.default, (int, float)) and not isinstance(
            action.default, bool
        )
        if action.type in (int, float) or (
            takes_value and action.type is None and numeric_default
        ):
            found.append(f"{parser.prog} {name}")
    return found


class _Parsed(Exception):
    def __init__(self, parser: argparse.ArgumentParser):
        self.parser = parser


def bench_parser(module, monkeypatch) -> argparse.ArgumentParser:
    """The parser ``bench NAME`` builds, caught as it starts to parse: no work runs."""

    def catch(self, args=None, namespace=None):
        raise _Parsed(self)

    with monkeypatch.context() as m:
        m.setattr(argparse.ArgumentParser, "parse_known_args", catch)
        try:
            if hasattr(module, "bench"):  # attention's sweep: a program of its own
                module.bench([])
            else:
                cli_helpers.bench_program(module, module.BENCH, [])
        except _Parsed as parsed:
            return parsed.parser
    pytest.fail(f"bench {module.BENCH} did not parse its options with argparse")


def all_parsers(monkeypatch) -> list[argparse.ArgumentParser]:
    parsers = [build_parser()]
    for name, entry in registry.snippets_by_name().items():
        if hasattr(entry.module, "add_arguments"):
            parser = cli_helpers.OneLineParser(prog=f"python -m snippets run {name}")
            entry.module.add_arguments(parser)
            parsers.append(parser)
    for module in registry.benches_by_name().values():
        parsers.append(bench_parser(module, monkeypatch))
    return parsers


def test_every_number_an_option_takes_is_checked_by_the_parser(monkeypatch) -> None:
    parsers = all_parsers(monkeypatch)
    assert len(parsers) > 3  # the CLI, the snippets with options, the benchmarks
    offenders = [o for p in parsers for o in numeric_options_without_a_validator(p)]
    assert not offenders, (
        "use a validator from snippets.core.cli (positive_int, nonnegative_int, "
        "positive_float, nonnegative_float) as type= for: " + ", ".join(offenders)
    )


def test_the_walk_catches_a_bare_int() -> None:
    parser = cli_helpers.OneLineParser(prog="demo")
    parser.add_argument("--iters", type=int, default=5)
    parser.add_argument("--size", default=1.5)
    parser.add_argument("--ok", type=cli_helpers.positive_int, default=5)
    parser.add_argument("--flag", action="store_true")
    assert numeric_options_without_a_validator(parser) == [
        "demo --iters",
        "demo --size",
    ]


def test_unwritable_results_folder_is_refused_before_running(tmp_path, capfd) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    line = refused(["run-all", "--results", str(blocker / "results")], capfd)
    assert line.startswith("error: cannot write results to")
    assert blocker.read_text() == "not a folder"  # nothing lost


def test_run_all_names_the_failed_snippet_and_its_note(tmp_path, capfd) -> None:
    status, _, err = in_process(
        capfd,
        "run-all",
        "--only",
        "process_groups",
        "--results",
        str(tmp_path),
        "--per-snippet-timeout",
        "0.5",
    )
    assert status == 1
    assert "process_groups" in err and "timed out" in err
    for note in registry.notes_embedding("process_groups"):
        assert str(note) in err
    assert not (tmp_path / "process_groups.json").exists()


def test_run_all_records_provenance_of_a_multi_rank_run(results_dir) -> None:
    """The suite's own run-all (the results_dir fixture) wrote process_groups."""
    record = json.loads((results_dir / "process_groups.json").read_text())
    assert set(record["provenance"]) >= {
        "device",
        "backend",
        "world_size",
        "torch",
        "commit",
        "utc",
    }
    assert record["provenance"]["world_size"] == 4
    assert record["provenance"]["backend"] in {"gloo", "nccl"}
    assert record["output"] in (results_dir / "process_groups.md").read_text()
    assert (results_dir / "process_groups.ranks.md").read_text().startswith("| rank |")


def test_run_all_caches_unchanged_code_and_reruns_when_forced(tmp_path, capfd) -> None:
    def run_all(*extra: str) -> tuple[int, str, str]:
        argv = ["run-all", "--only", "online_softmax", "--results", str(tmp_path)]
        return in_process(capfd, *argv, *extra)

    status, _, err = run_all()
    assert status == 0, err
    record = json.loads((tmp_path / "online_softmax.json").read_text())
    assert record["provenance"]["world_size"] == 1
    _, again, _ = run_all()
    assert "cached" in again
    assert json.loads((tmp_path / "online_softmax.json").read_text()) == record
    _, forced, _ = run_all("--force")
    assert "ran" in forced
    rerun = json.loads((tmp_path / "online_softmax.json").read_text())
    assert rerun["provenance"]["utc"] >= record["provenance"]["utc"]


def own_options(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    return {a.option_strings[-1]: a for a in parser._actions if a.option_strings}


def one_program_benches() -> list[str]:
    """The benchmarks with a SPEC whose ``bench`` door is ``bench_program``."""
    return sorted(
        name
        for name, module in registry.benches_by_name().items()
        if hasattr(module, "SPEC") and not hasattr(module, "bench")
    )


def options_in_help(argv: list[str], capsys) -> set[str]:
    """The long options ``python -m snippets *argv --help`` lists, in this process."""
    capsys.readouterr()
    status = exit_status(main, [*argv, "--help"])  # argparse's own --help exits
    out = capsys.readouterr().out
    assert status == 0 and "options:" in out, out
    return set(re.findall(r"(?m)^\s+(?:-\w[ \w]*, )?(--[a-z][\w-]*)", out))


@pytest.mark.parametrize("name", one_program_benches())
def test_bench_help_lists_the_options_of_run_help(name, capsys) -> None:
    """``bench NAME --help`` and ``run <its module> --help``: one list of options (run
    adds only ``--out``), the runner's and the benchmark's own."""
    leaf = registry.bench_modules()[name].rsplit(".", 1)[1]
    bench = options_in_help(["bench", name], capsys)
    assert {"--nproc", "--backend", "--timeout"} < bench
    assert options_in_help(["run", leaf], capsys) == bench | {"--out"}


@pytest.mark.parametrize("name", one_program_benches())
def test_both_doors_refuse_bad_input_with_the_same_line(
    name, monkeypatch, capfd
) -> None:
    """``bench NAME`` and ``run <its module>``: one parser, the same refusals."""
    module = registry.bench(name)
    bench = own_options(bench_parser(module, monkeypatch))
    leaf = registry.bench_modules()[name].rsplit(".", 1)[1]
    bad = [["--no-such-option"]] + [
        [option, "0"]
        for option, action in bench.items()
        if action.type in (cli_helpers.positive_int, cli_helpers.positive_float)
    ]
    for argv in bad:
        said = refused(["bench", name, *argv], capfd)
        assert refused(["run", leaf, *argv], capfd) == said, argv


def test_run_help_without_a_name_is_the_runners_help(capsys) -> None:
    assert main(["run", "--help"]) == 0
    assert "--nproc" in capsys.readouterr().out


def test_run_without_a_name_is_one_line_and_exit_2(capfd) -> None:
    assert "required: name" in refused(["run"], capfd)
