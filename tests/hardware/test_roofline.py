"""The roofline's counts against independent ones: a matmul's FLOPs against torch's
FlopCounterMode, its intensity by hand; the record's peak and bandwidth are the best of
its own tables; the chart's note sits at the knee on the roof; the command line refuses
bad sizes and unknown dtypes in one line; on a GPU, bf16 tensor cores beat fp32 without
TF32."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch
from conftest import REPO, refused
from torch.utils.flop_counter import FlopCounterMode

from snippets.hardware import roofline as R

CPU = torch.device("cpu")


@pytest.mark.parametrize("m,n,k", [(64, 64, 64), (96, 32, 80), (128, 64, 8)])
def test_matmul_flops_are_torchs_count(m: int, n: int, k: int) -> None:
    a, b = torch.randn(m, k), torch.randn(k, n)
    with FlopCounterMode(display=False) as counter:
        a @ b
    point = R.matmul_point(m, n, k, torch.float32, CPU)
    # intensity = FLOPs ÷ bytes, with every operand read or written once (fp32: 4 B)
    assert point["intensity"] * (m * k + k * n + m * n) * 4 == pytest.approx(
        counter.get_total_flops()
    )
    assert point["q1"] <= point["median"] <= point["q3"]


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "snippets", "run", "roofline", *args],
        cwd=REPO, capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def test_the_record_is_the_best_of_its_own_tables() -> None:
    result = R.main(max_n=256)
    mm, bw = result["tables"]["matmuls"], result["tables"]["bandwidth"]
    key = next(k for k in mm[0] if "FLOP/s" in k)
    scale = 1e12 if key.startswith("T") else 1e9
    best = max(float(r[key]) for r in mm)
    assert f"{result['peak_matmul_flops'] / scale:.1f}" == f"{best:.1f}"
    copies = [float(r["GB/s (median)"]) for r in bw if r["op"] == "copy"]
    assert f"{result['bandwidth_bytes_per_s'] / 1e9:.1f}" == f"{max(copies):.1f}"
    past = [r["MiB a buffer"] * 2**20 for r in bw]
    assert min(past) >= 4 * result["last_level_cache_bytes"] - 2**20  # past the cache
    # each matmul is placed under the roof its intensity meets: memory below the knee
    # (one dtype here, fp32, so its roof is the record's)
    for r in mm:
        below = r["FLOP/byte"] < result["knee_flop_per_byte"]
        assert r["bound"] == ("memory" if below else "compute")


def test_the_chart_notes_the_knee_on_the_roof() -> None:
    record = {"peak_matmul_flops": 1e11, "bandwidth_bytes_per_s": 1e10,
              "knee_flop_per_byte": 10.0}  # fmt: skip
    matmuls = [{"intensity": i, "median": f, "dtype": "fp32"}
               for i, f in ((2.0, 1.5e10), (50.0, 8e10))]  # fmt: skip
    spec = R.figures(record, matmuls)["roofline"]
    notes = [r for layer in spec["layer"] for r in layer.get("data", {}).get(
        "values", []) if "text" in r]  # fmt: skip
    # at the knee, bandwidth × I = 1e10 × 10 = the peak, 100 GFLOP/s
    assert {(r["x"], r["y"], r["text"]) for r in notes} == {
        (10.0, 100.0, "knee: 10.0 FLOP/byte")}  # fmt: skip
    assert all(r["series"].startswith("roofline") for r in notes)


def test_json_has_the_public_names() -> None:
    out = run("--max-n", "128", "--json")
    assert out.returncode == 0, out.stderr
    record = json.loads(out.stdout.strip().splitlines()[-1])
    assert {"peak_matmul_flops", "bandwidth_bytes_per_s"} <= set(record)
    side = int(record["peak_shape"].split("×")[0])
    assert record["peak_dtype"] == "fp32" and side <= 128  # what was asked, no more


@pytest.mark.parametrize(
    "args,words",
    [(["--max-n", "0"], "--max-n: must be at least 1"),
     (["--max-n", "32"], "--max-n must be at least 64"),
     (["--dtype", "fp8"], "--dtype: invalid choice: 'fp8'")],
)  # fmt: skip
def test_bad_input_is_one_line_and_exit_2(args, words, capfd) -> None:
    assert words in refused(["run", "roofline", *args], capfd)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_tensor_cores_beat_fp32_on_a_gpu() -> None:
    dev = torch.device("cuda")
    torch.backends.cuda.matmul.allow_tf32 = False
    bf16 = R.matmul_point(4096, 4096, 4096, torch.bfloat16, dev)
    fp32 = R.matmul_point(4096, 4096, 4096, torch.float32, dev)
    assert bf16["median"] > 2 * fp32["median"]
