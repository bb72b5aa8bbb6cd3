"""Tests for snippets.comm.allreduce_bench: the CLI's records (schema, nccl-tests' bandwidth
definitions, ours beside the built-in), bad input, and that a wrong algorithm is caught.
No timing assertions: times on a shared machine are not a pass/fail."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from snippets.comm import allreduce_bench as ab
from snippets.core.runtime import launch

REPO = Path(__file__).resolve().parents[2]
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
            {
                "naive_root",
                "naive_everyone",
                "ring",
                "tree",
                "double_tree",
                "halving_doubling",
            },
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
        assert r["ratio"] == pytest.approx(r["busbw"] / r["builtin_busbw"])


def test_table_output_names_ours_and_builtin():
    proc = bench_cli(
        "-n", "2", "--collective", "all_gather", "--sizes", "64K", "--iters", "1"
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.strip().splitlines()
    assert (
        "busbw" in lines[0]
        and len(lines) == 2
        and "built-in" in lines[1]
        and "ours/built-in" in lines[1]
    )


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


@pytest.mark.parametrize("argv", [["--sizes", "lots"], ["--backend", "carrier-pigeon"]])
def test_bad_input_through_the_cli(argv):
    proc = bench_cli(*argv)
    assert (
        proc.returncode == 2 and proc.stdout == "" and proc.stderr.startswith("error:")
    )
    assert len(proc.stderr.strip().splitlines()) == 1


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


# --- on real ranks: the self-check catches a wrong algorithm; the concept main() runs -----------


def _do_nothing(
    tensor, op=None, group=None
) -> None:  # an "all-reduce" that forgets to communicate
    pass


def _on_ranks() -> dict:
    import torch.distributed as dist

    out = {}
    try:
        ab.check("all_reduce", "do_nothing", _do_nothing, 1001, dist.get_world_size())
        out["caught"] = False
    except AssertionError as exc:
        out["caught"] = "disagrees" in str(exc)
    out["records"] = ab.sweep(
        "reduce_scatter", [3 * 4 * 7 + 4], ["ring"], iters=1
    )  # 7 elements per rank
    out["main"] = ab.main(target_mib=1)
    return out


def test_wrong_algorithm_is_caught_and_main_reports():
    out = launch(_on_ranks, 3, backend="gloo", timeout_s=120)
    assert all(r["caught"] for r in out)
    assert out[0]["records"][0]["size_bytes"] == 3 * 4 * 7
    main = out[0]["main"]
    reduce = [r for r in main["records"] if r["collective"] == "all_reduce"]
    assert {r["algorithm"] for r in reduce} == set(ab.MODEL_OF) and len(
        main["tables"]["sweep"]
    ) == len(reduce)
    assert {r["collective"] for r in main["records"]} == {
        "all_reduce",
        "all_gather",
        "reduce_scatter",
    }
    assert all(
        r["predicted_ping_pong_s"] > 0 and r["predicted_ring_s"] > 0
        for r in main["records"]
    )
    assert all(svg.startswith("<svg") for svg in main["figures"].values())
    assert [row["ranks"] for row in main["tables"]["target"]] == [2, 3]
    assert all(row["ring / built-in"] > 0 for row in main["tables"]["target"])


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
