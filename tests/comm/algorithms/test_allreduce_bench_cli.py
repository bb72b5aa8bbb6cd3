"""Tests for ``python -m snippets bench allreduce``: its records (schema, nccl-tests'
bandwidth definitions, ours beside the built-in) and its bad input. No timing
assertions: times on a shared machine are not a pass/fail."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from snippets.comm.algorithms import allreduce
from snippets.comm.algorithms import allreduce_bench_cli as ab

REPO = Path(__file__).resolve().parents[3]
KEYS = {
    "algorithm",
    "world_size",
    "size_bytes",
    "time_s",
    "algbw",
    "busbw",
    "builtin_busbw",
    "builtin_time_s",
    "ratio",
    "ratio_lo",
    "ratio_hi",
    "cpu_s",
    "builtin_cpu_s",
}


def bench_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "snippets", "bench", "allreduce", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=240,
    )


def bus_factor(collective: str, n: int) -> float:
    """nccl-tests, doc/PERFORMANCE.md, written out again here as the oracle."""
    return 2 * (n - 1) / n if collective == "all_reduce" else (n - 1) / n


def expected_bytes(collective: str, size: int, n: int) -> int:
    return size // 4 * 4 if collective == "all_reduce" else size // (4 * n) * 4 * n


@pytest.mark.parametrize(
    "collective,n,algos,extra",
    [
        (
            "all_reduce",
            3,
            set(allreduce.ALGORITHMS),
            [],
        ),
        (
            "all_reduce",
            2,
            {"ring", "tree"},
            ["--algorithms", "ring", "tree", "--handshake"],
        ),
        ("all_gather", 3, {"ring"}, []),
        ("reduce_scatter", 2, {"ring"}, []),
    ],
)
def test_json_records(collective, n, algos, extra):
    sizes = [4096, 12345]
    proc = bench_cli(
        "-n",
        str(n),
        "--collective",
        collective,
        "--sizes",
        *map(str, sizes),
        "--iters",
        "1",
        "--json",
        *extra,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    records = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
    assert {(r["algorithm"], r["size_bytes"]) for r in records} == {
        (a, expected_bytes(collective, s, n)) for a in algos for s in sizes
    }
    for r in records:
        assert KEYS <= set(r) and r["world_size"] == n and r["collective"] == collective
        assert (
            r["time_s"] > 0
            and r["builtin_time_s"] > 0
            and r["cpu_s"] > 0
            and r["builtin_cpu_s"] > 0
        )
        assert r["algbw"] == pytest.approx(r["size_bytes"] / r["time_s"])
        assert r["busbw"] == pytest.approx(r["algbw"] * bus_factor(collective, n))
        assert r["builtin_busbw"] == pytest.approx(
            r["size_bytes"] / r["builtin_time_s"] * bus_factor(collective, n)
        )
        # one round each: the median ratio is that round's, ours' busbw ÷ the built-in's
        assert r["ratio"] == pytest.approx(r["busbw"] / r["builtin_busbw"])
        assert r["ratio_lo"] == r["ratio"] == r["ratio_hi"]


def test_table_output_names_ours_and_builtin():
    proc = bench_cli(
        "-n", "2", "--collective", "all_gather", "--sizes", "64K", "--iters", "1"
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.strip().splitlines()
    assert len(lines) == 2 and "busbw" in lines[0] and "ours ÷ built-in" in lines[0]
    assert "all_gather" in lines[1] and "64 KiB" in lines[1] and "GB/s" in lines[1]
    assert all(len(line) <= 88 for line in lines)


@pytest.mark.parametrize(
    "argv",
    [
        ["--sizes", "garbage"],
        ["--sizes", "1.5M"],
        ["--sizes", "2"],
        ["-n", "0"],
        ["-n", "1"],
        ["--iters", "0"],
        ["--collective", "broadcast"],
        ["--collective", "all_gather", "--algorithms", "nope"],
        ["--collective", "reduce_scatter", "-n", "4", "--sizes", "8"],
    ],
)
def test_bad_input_is_one_line_and_exit_2(argv, capsys):
    with pytest.raises(SystemExit) as exc:
        ab.bench(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error:") and len(err.splitlines()) == 1
    assert argv[-2] in err or argv[0] in err  # it names the option


@pytest.mark.parametrize(
    "argv",
    [
        ["--sizes", "lots"],
        ["--backend", "carrier-pigeon"],
        ["--iters", "0"],
        ["--target-mib", "-1"],  # the snippet's option, not the sweep's
    ],
)
def test_bad_input_through_the_cli(argv):
    proc = bench_cli(*argv)
    assert proc.returncode == 2 and proc.stdout == "", proc.stderr
    assert proc.stderr.startswith("error:") and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert argv[0].lstrip("-") in proc.stderr  # it names the option


@pytest.mark.parametrize(
    "text,value",
    [
        ("4096", 4096),
        ("64K", 65536),
        ("1M", 1 << 20),
        ("1MiB", 1 << 20),
        ("2g", 2 << 30),
        ("3kb", 3072),
        ("4", 4),
    ],
)
def test_parse_size(text, value):
    assert ab.parse_size(text) == value


@pytest.mark.parametrize("text", ["", "M", "1.5M", "-4", "1T", "3", "12 parsecs"])
def test_parse_size_rejects(text):
    with pytest.raises(argparse.ArgumentTypeError):
        ab.parse_size(text)


@pytest.mark.gpu
@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs 2 CUDA GPUs")
def test_bench_on_nccl():
    proc = bench_cli(
        "-n", "2", "--backend", "nccl", "--sizes", "1M", "64M", "--iters", "3", "--json"
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    records = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
    assert records and all(
        r["backend"] == "nccl" and r["builtin_busbw"] > 0 for r in records
    )
