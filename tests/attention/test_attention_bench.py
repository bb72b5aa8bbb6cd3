"""The attention benchmark: its naive reference, FLOP count, checks, CLI and records."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode

from snippets.__main__ import main as cli_main
from snippets.attention import attention_bench as ab
from snippets.core.measure import peak_memory_bytes


def cli(*args: str) -> int:
    try:
        return cli_main(["bench", "attention", *args])
    except SystemExit as exc:  # argparse's usage errors
        return exc.code


@pytest.mark.parametrize("N,causal", [(1, False), (37, False), (37, True), (130, True)])
def test_naive_attention_is_attention(N, causal):
    q, k, v = (torch.randn(2, 3, N, 32, dtype=torch.float64) for _ in range(3))
    ref = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    torch.testing.assert_close(ab.naive_attention(q, k, v, causal), ref)


def test_flop_count_matches_torchs_counter():
    """Forward = two N×N×d matmuls = 4·B·H·N²·d, as torch's own FLOP counter counts them."""
    B, H, N, d = 2, 3, 40, 32
    q, k, v = (torch.randn(B, H, N, d) for _ in range(3))
    with FlopCounterMode(display=False) as counter:
        ab.naive_attention(q, k, v)
    assert (
        ab.attention_flops(B, H, N, d, causal=False) == 3.5 * counter.get_total_flops()
    )
    assert (
        ab.attention_flops(B, H, N, d, causal=True)
        == 3.5 * counter.get_total_flops() / 2
    )


def test_measure_refuses_a_wrong_implementation():
    wrong = lambda q, k, v, causal: F.scaled_dot_product_attention(
        q, k, v, is_causal=not causal
    )  # noqa: E731
    impls = {"sdpa": ab.implementations()["sdpa"], "wrong": wrong}
    with pytest.raises(AssertionError, match="wrong N=33"):
        ab.measure(
            impls, 1, 2, 33, 32, False, torch.float32, torch.device("cpu"), iters=1
        )


def test_measured_memory_grows_with_n_squared_only_for_naive():
    """The meter on known allocations first, then the claim itself at one N."""
    N = 1024
    assert (
        peak_memory_bytes(lambda: torch.empty(1, 1, N, N)) == 4 * N * N
    )  # one fp32 N×N matrix
    q, k, v, do = (torch.randn(1, 1, N, 64) for _ in range(4))
    q, k, v = (t.requires_grad_() for t in (q, k, v))
    impls = ab.implementations(block_q=128, block_k=128)
    naive = peak_memory_bytes(ab.fwd_bwd(impls["naive"], q, k, v, do, False))
    tiled = peak_memory_bytes(ab.fwd_bwd(impls["flash"], q, k, v, do, False))
    assert naive >= 2 * 4 * N * N  # the scores and the probabilities, at least
    assert (
        tiled < 4 * N * N / 2
    )  # not even half of one N×N matrix: O(N·d) tensors and one tile


def test_json_records(capsys):
    assert (
        cli(
            "--seq-lens",
            "64",
            "97",
            "--head-dim",
            "40",
            "--heads",
            "3",
            "--iters",
            "1",
            "--causal",
            "--json",
        )
        == 0
    )
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert {(r["impl"], r["seq_len"]) for r in records} == {
        (i, n) for i in ("naive", "flash", "sdpa") for n in (64, 97)
    }
    for r in records:
        assert (
            r["head_dim"] == 40
            and r["heads"] == 3
            and r["causal"] is True
            and r["dtype"] == "float32"
        )
        assert (
            r["time_s"] > 0
            and isinstance(r["peak_bytes"], int)
            and r["peak_bytes"] > 0
            and r["tflops"] > 0
        )
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
        [
            sys.executable,
            "-m",
            "snippets",
            "bench",
            "attention",
            "--seq-lens",
            "48",
            "--iters",
            "1",
            "--threads",
            "1",
            "--json",
        ],
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
    assert (
        cli(
            "--seq-lens",
            "50",
            "--iters",
            "1",
            "--impls",
            "flash",
            "sdpa",
            "--block-q",
            "16",
            "--block-k",
            "24",
        )
        == 0
    )
    out = capsys.readouterr().out.splitlines()
    assert "time ÷ SDPA" in out[1] and len(out) == 4
    assert (
        out[2].split()[:2] == ["50", "flash"] and out[2].split()[-1] == "-"
    )  # no naive: no memory ratio


@pytest.mark.parametrize(
    "args,message",
    [
        (["--head-dim", "20"], "--head-dim 20 is not supported"),
        (["--head-dim", "136"], "--head-dim 136 is not supported"),
        (["--head-dim", "60"], "--head-dim 60 is not supported"),
        (["--seq-lens", "0"], "must be at least 1"),
        (["--seq-lens", "abc"], "expected a whole number"),
        (["--iters", "0"], "must be at least 1"),
        (["--impls", "bogus"], "invalid choice"),
        (["--dtype", "fp8"], "invalid choice"),
        (["--device", "tpu"], "unknown device"),
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
@pytest.mark.parametrize("args", [["--device", "cuda"], ["--impls", "triton"]])
def test_gpu_only_options_are_refused_on_a_cpu(capsys, args):
    assert cli(*args, "--seq-lens", "32") == 2
    assert "GPU" in capsys.readouterr().err


def test_snippet_main_returns_table_and_figures():
    result = ab.main()
    assert {r["impl"] for r in result["records"]} >= {"naive", "flash", "sdpa"}
    assert set(result["figures"]) == {"time", "memory"}
    assert all(svg.startswith("<svg") for svg in result["figures"].values())
    assert len(result["tables"]["sweep"]) == len(result["records"])
    assert torch.get_num_threads() >= 1
