"""``bench attention --tflops``: the FLOP formula, the report from a fake timer, the
one-line refusal without a GPU, and (on a GPU) the real command."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from snippets.__main__ import main as cli_main
from snippets.attention import attention_tflops as tf
from snippets.attention.attention_timing import forward_flops
from snippets.attention.triton_support import COMPILED

REPO = Path(__file__).resolve().parents[2]


def _bench(*args: str, timeout: int = 240) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "snippets", "bench", "attention", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_forward_flops_by_the_formula():
    # 4·B·H·N²·d: two matmuls of N×N×d multiply-adds per head, 2 FLOPs each
    assert forward_flops(4, 16, 4096, 128, causal=False) == 4 * 4 * 16 * 4096**2 * 128
    assert forward_flops(4, 16, 4096, 128, causal=False) == 549755813888
    assert forward_flops(1, 1, 3, 8, causal=True) == 4 * 9 * 8 / 2


def _sdpa(q, k, v, causal):
    return F.scaled_dot_product_attention(q, k, v, is_causal=causal)


def _fake_records(times: dict[str, list[float]], repeats: int = 3) -> list[dict]:
    """measure_tflops on the CPU with a timer that reports the given seconds per call,
    in turn: first each impl's one calibration call, then the interleaved samples."""
    order = list(times)
    script = [times[n][0] for n in order]  # calibration
    script += [times[n][1 + r] for r in range(repeats) for n in order]
    seen = []

    def timer(fn, calls):
        seen.append(calls)
        return script[len(seen) - 1]

    def zero(q, k, v, causal):  # wrong on purpose for the refusal test below
        return torch.zeros_like(q)

    impls = {"triton": _sdpa, "flash": _sdpa, "sdpa": _sdpa, "zero": zero}
    impls = {n: impls[n] for n in order}
    cpu = torch.device("cpu")
    shape = dict(B=2, H=3, d=32, dtype=torch.float32, device=cpu)
    records = tf.measure_tflops(impls, 64, True, repeats=repeats, timer=timer, **shape)
    assert len(seen) == len(order) * (1 + repeats)
    return records


def test_report_from_a_fake_timer():
    times = {
        "triton": [0.004, 0.004, 0.003, 0.005],
        "flash": [0.030, 0.020, 0.030, 0.040],
        "sdpa": [0.002, 0.002, 0.002, 0.0021],
    }
    records = _fake_records(times)
    by = {r["impl"]: r for r in records}
    assert list(by) == ["triton", "flash", "sdpa"]
    flops = 4 * 2 * 3 * 64**2 * 32 / 2
    for name, r in by.items():
        samples = times[name][1:]
        assert r["flops"] == flops and r["time_s"] == sorted(samples)[1]
        assert r["tflops"] == pytest.approx(flops / sorted(samples)[1] / 1e12)
        assert r["tflops_min"] == pytest.approx(flops / max(samples) / 1e12)
        assert r["tflops_max"] == pytest.approx(flops / min(samples) / 1e12)
        # enough calls for a 20 ms sample, from the calibration call's time
        assert r["calls_per_sample"] == math.ceil(tf.SAMPLE_S / times[name][0])
    assert by["triton"]["vs_sdpa"] == pytest.approx(0.002 / 0.004)
    assert by["sdpa"]["vs_sdpa"] == 1.0 and by["sdpa"]["separated"] is None
    assert by["triton"]["separated"] is True  # 3-5 ms vs 2-2.1 ms
    lines = tf.title(2, 3, 32, "float32", "cpu", 3) + [tf.HEADER]
    lines += [tf.format_row(r) for r in records]
    assert all(len(line) <= 88 for line in lines), max(lines, key=len)
    row = tf.format_row(by["triton"]).split()
    assert row[:3] == ["True", "64", "triton"] and row[-2:] == ["0.50", "yes"]
    assert tf.HEADER.split()[:3] == ["causal", "N", "impl"]


def test_overlapping_spreads_are_not_separated():
    times = {"triton": [1e-3, 2e-3, 1e-3, 3e-3], "sdpa": [1e-3, 1.5e-3, 1e-3, 2e-3]}
    by = {r["impl"]: r for r in _fake_records(times)}
    assert by["triton"]["separated"] is False
    assert tf.format_row(by["triton"]).split()[-1] == "no"


def test_a_wrong_forward_is_refused_before_timing():
    with pytest.raises(AssertionError, match="zero N=64 causal=True"):
        _fake_records({"sdpa": [1e-3] * 4, "zero": [1e-3] * 4})


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal without one")
@pytest.mark.parametrize("extra", [[], ["--json"]])
def test_without_cuda_one_line_and_exit_2(extra):
    proc = _bench("--tflops", *extra)
    assert proc.returncode == 2, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and proc.stdout == ""
    assert "needs a CUDA GPU" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.parametrize(
    "args", [["--impls", "naive"], ["--dtype", "fp32"], ["--seq-lens", "0"]]
)
def test_bad_tflops_options_are_one_line(capsys, args):
    try:
        code = cli_main(["bench", "attention", "--tflops", *args])
    except SystemExit as exc:  # argparse's usage errors
        code = exc.code
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and "error:" in err


@pytest.mark.gpu
@pytest.mark.skipif(not (torch.cuda.is_available() and COMPILED), reason="needs CUDA")
def test_the_command_on_a_gpu():
    """Small and quick, so that the full sweep's failure modes show here first."""
    proc = _bench("--tflops", "--seq-lens", "1024", "--iters", "2", "--json")
    assert proc.returncode == 0, proc.stderr[-3000:]
    records = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [(r["causal"], r["impl"]) for r in records] == [
        (c, i) for c in (False, True) for i in ("triton", "flash", "sdpa")
    ]
    for r in records:
        assert r["dtype"] == "bfloat16" and r["seq_len"] == 1024
        assert r["flops"] == forward_flops(4, 16, 1024, 128, r["causal"])
        assert 0 < r["tflops_min"] <= r["tflops"] <= r["tflops_max"] < 5000
