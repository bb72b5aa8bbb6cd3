"""The attention benchmark's command line, its records and the snippet's charts."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from snippets.__main__ import main as cli_main
from snippets.attention import attention_bench as ab
from snippets.attention import attention_timing as at


def cli(*args: str) -> int:
    try:
        return cli_main(["bench", "attention", *args])
    except SystemExit as exc:  # argparse's usage errors
        return exc.code


@pytest.fixture
def two_threads():
    """Two torch threads before and after, so that a leaked setting shows."""
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    yield 2
    torch.set_num_threads(before)


def _spy_threads(monkeypatch) -> list[int]:
    """torch's thread count at every timed call of the benchmark."""
    seen = []
    real = at.time_it

    def time_it(fn, **kw):
        seen.append(torch.get_num_threads())
        return real(fn, **kw)

    monkeypatch.setattr(at, "time_it", time_it)
    return seen


def test_json_records(capsys):
    args = ("--seq-lens", "64", "97", "--head-dim", "40", "--heads", "3")
    assert cli(*args, "--iters", "1", "--causal", "--json") == 0
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert {(r["impl"], r["seq_len"]) for r in records} == {
        (i, n) for i in ("naive", "flash", "sdpa") for n in (64, 97)
    }
    for r in records:
        assert (r["head_dim"], r["heads"], r["causal"]) == (40, 3, True)
        assert r["dtype"] == "float32"
        assert r["time_s"] > 0 and r["tflops"] > 0
        assert isinstance(r["peak_bytes"], int) and r["peak_bytes"] > 0
        same_n = {s["impl"]: s for s in records if s["seq_len"] == r["seq_len"]}
        assert r["time_vs_sdpa"] == pytest.approx(
            r["time_s"] / same_n["sdpa"]["time_s"]
        )
        assert r["memory_vs_naive"] == pytest.approx(
            r["peak_bytes"] / same_n["naive"]["peak_bytes"]
        )


def test_json_stdout_is_only_json_from_the_command_line():
    """Run as a user would: nothing else (profiler logs, notes) may land on stdout."""
    proc = subprocess.run(
        [sys.executable, "-m", "snippets", "bench", "attention"]
        + ["--seq-lens", "48", "--iters", "1", "--threads", "1", "--json"],
        cwd=Path(__file__).resolve().parents[2],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    records = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [r["impl"] for r in records] == ["naive", "flash", "sdpa"]
    assert "USDT" not in proc.stderr


def test_table_output_and_subset(capsys):
    args = ("--seq-lens", "50", "--iters", "1", "--impls", "flash", "sdpa")
    assert cli(*args, "--block-q", "16", "--block-k", "24") == 0
    out = capsys.readouterr().out.splitlines()
    assert "time ÷ SDPA" in out[1] and len(out) == 4
    assert all(len(line) <= 88 for line in out), max(out, key=len)
    # no naive: no memory ratio
    assert out[2].split()[:2] == ["50", "flash"] and out[2].split()[-1] == "-"


def test_threads_option_holds_during_measurement_and_is_restored(
    capsys, monkeypatch, two_threads
):
    seen = _spy_threads(monkeypatch)
    args = ("--seq-lens", "40", "--iters", "2", "--impls", "sdpa", "flash")
    assert cli(*args, "--threads", "1") == 0
    assert "(1 threads)" in capsys.readouterr().out.splitlines()[0]
    assert seen == [1] * 4  # 2 rounds × 2 implementations, all on one thread
    assert torch.get_num_threads() == two_threads


@pytest.mark.parametrize(
    "args,message",
    [
        (["--head-dim", "20"], "--head-dim: use a multiple of 8 from 32 to 128"),
        (["--head-dim", "136"], "--head-dim: use a multiple of 8 from 32 to 128"),
        (["--head-dim", "60"], "--head-dim: use a multiple of 8 from 32 to 128"),
        (["--seq-lens", "0"], "must be at least 1"),
        (["--seq-lens", "abc"], "expected a whole number"),
        (["--iters", "0"], "must be at least 1"),
        (["--threads", "-2"], "must be at least 1"),
        (["--impls", "bogus"], "invalid choice"),
        (["--dtype", "fp8"], "invalid choice"),
        (["--device", "tpu"], "invalid choice"),
        (["--frobnicate"], "unrecognized arguments"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(capsys, args, message):
    assert cli(*args) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


@pytest.mark.skipif(
    torch.cuda.is_available(), reason="checks the refusal on a machine without a GPU"
)
@pytest.mark.parametrize(
    "args", [["--device", "cuda"], ["--impls", "triton"], ["--tflops"]]
)
def test_gpu_only_options_are_refused_on_a_cpu(capsys, args):
    assert cli(*args, "--seq-lens", "32") == 2
    err = capsys.readouterr().err
    assert "GPU" in err and len(err.strip().splitlines()) == 1


def _chart_rows(spec: dict) -> list[dict]:
    """Every data row anywhere in a Vega-Lite spec (top level or in its layers)."""
    found = []
    if isinstance(spec, dict):
        values = spec.get("data", {}).get("values")
        if isinstance(values, list):
            found += values
        for rows in spec.get("datasets", {}).values():  # data an encoding names
            found += rows
        for key, sub in spec.items():
            if key not in ("data", "datasets"):
                found += _chart_rows(sub)
    elif isinstance(spec, list):
        for sub in spec:
            found += _chart_rows(sub)
    return found


def test_snippet_main_returns_table_and_chart_specs(monkeypatch, two_threads):
    seen = _spy_threads(monkeypatch)
    result = ab.main()
    # main measures on one thread, then gives the caller's setting back
    assert seen and set(seen) == {1}
    assert torch.get_num_threads() == two_threads
    records = result["records"]
    names = {"naive", "flash", "sdpa"}
    assert {r["impl"] for r in records} == names
    assert len(result["tables"]["sweep"]) == len(records)
    assert set(result["figures"]) == {"time", "memory"}
    for fig, key, unit in (("time", "time_s", 1), ("memory", "peak_bytes", 2**20)):
        spec = result["figures"][fig]
        assert isinstance(spec, dict) and "vega-lite" in spec["$schema"]
        json.dumps(spec)  # JSON-able, as results/ stores it
        assert spec.get("description"), f"{fig}: a chart needs a text alternative"
        rows = _chart_rows(spec)
        assert {row["series"] for row in rows} == names
        got = sorted((row["series"], row["x"], row["y"]) for row in rows)
        want = sorted((r["impl"], r["seq_len"], r[key] / unit) for r in records)
        assert len(got) == len(want)
        for (gs, gx, gy), (ws, wx, wy) in zip(got, want):
            assert (gs, gx) == (ws, wx) and gy == pytest.approx(wy)
