"""The attention benchmark: the naive reference and the FLOP count against torch's
own, the check against SDPA, the measured memory of naive vs tiled attention, the
records on a clock whose times are known, the command line (sweep and ``--tflops``),
and the snippet's charts, with and without the kernel's free memory to read. The timing
itself is tested in tests/core/test_timing.py; times on a shared machine are not a
pass/fail."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from conftest import refused
from torch.utils.flop_counter import FlopCounterMode

from snippets.__main__ import main as cli_main
from snippets.attention import attention_bench as ab
from snippets.attention.triton_support import COMPILED
from snippets.core import timing
from snippets.core.measure import peak_memory_bytes

REPO = Path(__file__).resolve().parents[2]
CPU = torch.device("cpu")
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")


def cli(*args: str) -> int:
    return cli_main(["bench", "attention", *args])


def command(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "snippets", "bench", "attention", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=240,
    )


class Clock:
    """Seconds that pass only when a call spends them: times known exactly."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def costing(self, fn, seconds: float):
        """``fn`` as it is, but each call takes ``seconds`` on this clock."""

        def call(*args):
            self.now += seconds
            return fn(*args)

        return call


# --- what is computed: the reference, the FLOPs, the check ---


@pytest.mark.parametrize("N,causal", [(1, False), (37, False), (37, True), (130, True)])
def test_naive_attention_is_attention(N, causal):
    q, k, v = (torch.randn(2, 3, N, 32, dtype=torch.float64) for _ in range(3))
    ref = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    torch.testing.assert_close(ab.naive_attention(q, k, v, causal), ref)


def test_flop_count_matches_torchs_counter():
    """Forward = two N×N×d matmuls = 4·B·H·N²·d, as torch's own FLOP counter counts
    them; forward + backward is 3.5× that; causal halves both."""
    B, H, N, d = 2, 3, 40, 32
    q, k, v = (torch.randn(B, H, N, d) for _ in range(3))
    with FlopCounterMode(display=False) as counter:
        ab.naive_attention(q, k, v)
    counted = counter.get_total_flops()
    assert counted == 4 * B * H * N * N * d
    assert ab.forward_flops(B, H, N, d, causal=False) == counted
    assert ab.forward_flops(B, H, N, d, causal=True) == counted / 2
    assert ab.attention_flops(B, H, N, d, causal=False) == 3.5 * counted
    assert ab.attention_flops(B, H, N, d, causal=True) == 3.5 * counted / 2
    assert ab.forward_flops(4, 16, 4096, 128, causal=False) == 549755813888


def test_measure_refuses_a_wrong_implementation():
    def wrong(q, k, v, causal):
        return F.scaled_dot_product_attention(q, k, v, is_causal=not causal)

    impls = {"sdpa": ab.sdpa, "wrong": wrong}
    with pytest.raises(AssertionError, match="wrong N=33"):
        ab.measure(impls, 1, 2, 33, 32, False, torch.float32, CPU, iters=1)


# --- the records, on a clock whose times are known ---


def test_sweep_records_on_known_times(monkeypatch):
    """flash costs 3 s a call and SDPA 1.5 s: time ÷ SDPA is 2 in every round."""
    clock = Clock()
    monkeypatch.setattr(ab, "interleave", lambda *a, **kw: timing.interleave(
        *a, **kw, clock=clock))  # fmt: skip
    impls = {"flash": clock.costing(ab.implementations(16, 16)["flash"], 3.0),
             "sdpa": clock.costing(ab.sdpa, 1.5)}  # fmt: skip
    records = ab.measure(impls, 1, 1, 20, 32, True, torch.float32, CPU, iters=3)
    by = {r["impl"]: r for r in records}
    assert by["flash"]["times_s"] == [3.0] * 3 and by["flash"]["rounds"] == 3
    assert (by["flash"]["ratio_lo"], by["flash"]["ratio_hi"]) == (2.0, 2.0)
    assert by["sdpa"]["ratio"] == 1.0
    assert by["flash"]["tflops"] == ab.attention_flops(1, 1, 20, 32, True) / 3 / 1e12
    assert by["flash"]["memory_vs_naive"] is None  # no naive in this run


def _tflops(costs: dict[str, float], rounds: int = 3) -> dict[str, dict]:
    clock, sdpa = Clock(), (lambda q, k, v, c: F.scaled_dot_product_attention(
        q, k, v, is_causal=c))  # fmt: skip
    impls = {name: clock.costing(sdpa, s) for name, s in costs.items()}
    shape = dict(B=2, H=3, d=32, dtype=torch.float32, device=CPU, rounds=rounds)
    records = ab.measure_tflops(impls, 64, True, clock=clock, **shape)
    return {r["impl"]: r for r in records}


def test_tflops_records_on_known_times():
    costs = {"triton": 2**-8, "flash": 2**-5, "sdpa": 2**-9}  # exact in binary
    by = _tflops(costs)
    assert list(by) == ["triton", "flash", "sdpa"]
    flops = 4 * 2 * 3 * 64**2 * 32 / 2
    for name, seconds in costs.items():
        r = by[name]
        assert r["flops"] == flops and r["time_s"] == pytest.approx(seconds)
        assert r["tflops"] == pytest.approx(flops / seconds / 1e12)
        # enough back-to-back calls for a 20 ms sample, from one call's time
        assert r["calls_per_sample"] == math.ceil(ab.SAMPLE_S / seconds)
    assert by["triton"]["vs_sdpa"] == 0.5  # SDPA's time ÷ the kernel's
    assert by["triton"]["separated"] is True and by["sdpa"]["separated"] is None
    lines = ab.tflops_title(2, 3, 32, "float32", "cpu", 3) + [ab.TFLOPS_HEADER]
    lines += [ab.tflops_row(r) for r in by.values()]
    assert all(len(line) <= 88 for line in lines), max(lines, key=len)
    row = ab.tflops_row(by["triton"]).split()
    assert row[:3] == ["True", "64", "triton"] and row[-2:] == ["0.50", "yes"]


def test_equal_times_are_not_separated():
    by = _tflops({"triton": 2**-9, "sdpa": 2**-9})
    assert by["triton"]["vs_sdpa"] == 1.0
    assert by["triton"]["separated"] is False
    assert ab.tflops_row(by["triton"]).split()[-1] == "no"


def test_a_wrong_forward_is_refused_before_timing():
    def zero(q, k, v, causal):
        return torch.zeros_like(q)

    impls = {"sdpa": ab.sdpa, "zero": zero}
    with pytest.raises(AssertionError, match="zero N=64 causal=True"):
        ab.measure_tflops(impls, 64, True, B=1, H=1, d=32, dtype=torch.float32,
                          device=CPU)  # fmt: skip


# --- measured memory ---


def _peaks(N: int, device: torch.device) -> tuple[int, int]:
    q, k, v, do = (torch.randn(1, 1, N, 64, device=device) for _ in range(4))
    q, k, v = (t.requires_grad_() for t in (q, k, v))
    impls = ab.implementations(block_q=128, block_k=128)
    naive = ab.fwd_bwd(impls["naive"], q, k, v, do, False)
    tiled = ab.fwd_bwd(impls["flash"], q, k, v, do, False)
    naive(), tiled()  # warm up: cuBLAS's workspace is allocated on the first matmul
    return peak_memory_bytes(naive, device), peak_memory_bytes(tiled, device)


def test_measured_memory_grows_with_n_squared_only_for_naive():
    """The meter on a known allocation first, then the claim itself at one N."""
    N = 1024
    one_matrix = 4 * N * N  # one fp32 N×N matrix
    assert peak_memory_bytes(lambda: torch.empty(1, 1, N, N)) == one_matrix
    naive, tiled = _peaks(N, CPU)
    assert naive >= 2 * one_matrix  # the scores and the probabilities, at least
    # not even half of one N×N matrix: O(N·d) tensors and one tile
    assert tiled < one_matrix / 2


@pytest.mark.gpu
@needs_cuda
def test_cuda_peak_memory_of_naive_vs_tiled():
    """The same claim measured by the CUDA caching allocator's high-water mark."""
    dev = torch.device("cuda")
    N = 4096
    one_matrix = 4 * N * N  # 64 MiB
    known = peak_memory_bytes(lambda: torch.empty(N, N, device=dev), dev)
    assert one_matrix <= known < one_matrix + (2 << 20)
    naive, tiled = _peaks(N, dev)
    assert naive >= 2 * one_matrix, f"naive peaked at {naive / 2**20:.1f} MiB"
    assert tiled < one_matrix / 2, f"tiled peaked at {tiled / 2**20:.1f} MiB"
    assert naive > 4 * tiled


# --- the command line ---


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

    def spied(fns, *args, **kw):
        def watch(fn):
            return lambda: (seen.append(torch.get_num_threads()), fn())[1]

        return timing.interleave({n: watch(f) for n, f in fns.items()}, *args, **kw)

    monkeypatch.setattr(ab, "interleave", spied)
    return seen


def test_json_records(capsys):
    args = ("--seq-lens", "64", "97", "--head-dim", "40", "--heads", "3")
    assert cli(*args, "--iters", "2", "--causal", "--json") == 0
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert {(r["impl"], r["seq_len"]) for r in records} == {
        (i, n) for i in ("naive", "flash", "sdpa") for n in (64, 97)
    }
    for r in records:
        assert (r["head_dim"], r["heads"], r["causal"]) == (40, 3, True)
        assert r["dtype"] == "float32" and r["rounds"] == len(r["times_s"]) == 2
        assert isinstance(r["peak_bytes"], int)
    for r in (r for r in records if r["impl"] == "sdpa"):
        assert r["ratio_lo"] == r["ratio_hi"] == 1.0  # SDPA ÷ itself, each round
    for r in (r for r in records if r["impl"] == "naive"):
        assert r["memory_vs_naive"] == 1.0


def test_json_stdout_is_only_json_from_the_command_line():
    """Run as a user would: nothing else (profiler logs, notes) may land on stdout."""
    proc = command("--seq-lens", "48", "--iters", "1", "--threads", "1", "--json")
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
def test_bad_input_is_one_line_and_exit_2(capfd, args, message):
    assert message in refused(["bench", "attention", *args], capfd)


@pytest.mark.skipif(
    torch.cuda.is_available(), reason="checks the refusal on a machine without a GPU"
)
@pytest.mark.parametrize(
    "args", [["--device", "cuda"], ["--impls", "triton"], ["--tflops"]]
)
def test_gpu_only_options_are_refused_on_a_cpu(capfd, args):
    assert "GPU" in refused(["bench", "attention", *args, "--seq-lens", "32"], capfd)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal without one")
@pytest.mark.parametrize("extra", [[], ["--json"]])
def test_tflops_without_cuda_is_one_line_and_exit_2(extra, capfd):
    argv = ["bench", "attention", "--tflops", *extra]
    assert "needs a CUDA GPU" in refused(argv, capfd, nothing_on_stdout=True)


@pytest.mark.parametrize(
    "args", [["--impls", "naive"], ["--dtype", "fp32"], ["--seq-lens", "0"]]
)
def test_bad_tflops_options_are_one_line(capfd, args):
    assert "error:" in refused(["bench", "attention", "--tflops", *args], capfd)


@pytest.mark.gpu
@pytest.mark.skipif(not (torch.cuda.is_available() and COMPILED), reason="needs CUDA")
def test_the_tflops_command_on_a_gpu():
    """Small and quick, so that the full sweep's failure modes show here first."""
    proc = command("--tflops", "--seq-lens", "1024", "--iters", "2", "--json")
    assert proc.returncode == 0, proc.stderr[-3000:]
    records = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [(r["causal"], r["impl"]) for r in records] == [
        (c, i) for c in (False, True) for i in ("triton", "flash", "sdpa")
    ]
    for r in records:
        assert r["dtype"] == "bfloat16" and r["seq_len"] == 1024
        assert r["flops"] == ab.forward_flops(4, 16, 1024, 128, r["causal"])
        assert r["tflops_lo"] <= r["tflops"] <= r["tflops_hi"] < 5000


# --- the snippet ---


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
    if Path("/proc/meminfo").exists():  # Linux: free memory read, nothing unsaid
        assert result["not_measured"] is None


def test_without_meminfo_main_runs_and_says_free_memory_was_not_read(
    monkeypatch, tmp_path, capsys
):
    """The reader taken away, as on macOS: /proc/meminfo is not there."""
    monkeypatch.setattr(ab, "MEMINFO", str(tmp_path / "meminfo"))
    assert ab.available_bytes(CPU) == math.inf
    result = ab.main()
    said = result["not_measured"]
    assert "MemAvailable" in said and "not read" in said
    assert said in capsys.readouterr().out.splitlines()
    assert result["figures"]["memory"]["description"].endswith(said)  # its caption
    naive = [r["seq_len"] for r in result["records"] if r["impl"] == "naive"]
    assert naive == [256, 512, 1024, 2048]  # every N, as the sentence says
