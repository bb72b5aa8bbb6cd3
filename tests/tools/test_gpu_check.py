"""`make gpu-check` on a machine without a GPU: it refuses in one line; and its parts,
fed a synthetic junit XML and made-up steps: the counts, the skipped tests with their
reasons, the TFLOP/s table, the time budget, and the two files it writes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from conftest import REPO, alive, refused

from snippets.tools import gpu_check, gpu_report

JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" tests="6">
<testcase classname="tests.core.test_measure" name="test_cuda_peak" time="0.1"/>
<testcase classname="tests.attention.test_flash_attention" name="test_on_cuda[bf16]"/>
<testcase classname="tests.comm.test_allreduce" name="test_on_nccl">
  <skipped type="pytest.skip" message="needs at least 2 CUDA GPUs">skip</skipped>
</testcase>
<testcase classname="tests.comm.test_cost_model" name="test_fit_on_nccl">
  <skipped type="pytest.skip" message="needs 2 CUDA GPUs">skip</skipped>
</testcase>
<testcase classname="tests.hardware.test_p2p_bandwidth" name="test_copies">
  <failure message="AssertionError: copy lost bytes">trace</failure>
</testcase>
<testcase classname="tests.attention.test_x" name="collect">
  <error message="ImportError: no module named altair">trace</error>
</testcase>
</testsuite></testsuites>
"""

RECORDS = [
    {"impl": "triton", "seq_len": 4096, "causal": False, "tflops": 400.0},
    {"impl": "sdpa", "seq_len": 4096, "causal": False, "tflops": 500.0},
    {"impl": "flash", "seq_len": 4096, "causal": False, "tflops": 50.0},
]
for r in RECORDS:
    r["vs_sdpa"], r["separated"] = r["tflops"] / 500.0, r["impl"] != "flash"
ENV = {
    "gpu": "1× NVIDIA H200, 140 GiB",
    "cpu": "x86_64, 16 cores",
    "driver": "580.159.04",
    "python": "3.12.3",
    "torch": "2.11.0",
    "cuda": "13.0",
    "triton": "3.6.0",
    "commit": "70ca07d1a133",
    "utc": "2026-12-01T12:00:07Z",
}


def step(name: str, status: str, output: str = "", seconds: float = 1.0) -> dict:
    return {"name": name, "what": "", "status": status, "seconds": seconds,
            "output": output}  # fmt: skip


def test_without_a_gpu_it_refuses_in_one_line(tmp_path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "snippets.tools.gpu_check", "--results", str(tmp_path)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "CUDA_VISIBLE_DEVICES": ""},
    )
    assert proc.returncode == 2
    assert proc.stderr == "error: needs a CUDA GPU; this machine has none\n"
    assert list(tmp_path.iterdir()) == []


def test_junit_counts_and_skip_reasons(tmp_path) -> None:
    (tmp_path / "gpu.xml").write_text(JUNIT)
    tests = gpu_report.parse_junit(tmp_path / "gpu.xml")
    assert (tests["passed"], tests["failed"], tests["skipped"]) == (2, 2, 2)
    assert tests["skips"] == [
        {"test": "tests.comm.test_allreduce::test_on_nccl",
         "reason": "needs at least 2 CUDA GPUs"},
        {"test": "tests.comm.test_cost_model::test_fit_on_nccl",
         "reason": "needs 2 CUDA GPUs"},
    ]  # fmt: skip
    assert "copy lost bytes" in tests["failures"][0]["why"]
    missing = gpu_report.parse_junit(tmp_path / "absent.xml")
    assert missing["passed"] == missing["failed"] == 0


def test_tflops_lines_become_one_row_per_length() -> None:
    output = "compiling...\n" + "\n".join(json.dumps(r) for r in RECORDS) + "\n{}\n"
    records = gpu_report.parse_tflops(output)
    assert records == RECORDS
    [row] = gpu_report.tflops_rows(records)
    assert row["N"] == 4096 and row["triton"] == "400.0" and row["sdpa"] == "500.0"
    assert row["triton ÷ sdpa"] == "0.80"
    assert row["flash ÷ sdpa"] == "0.10 (overlap)"
    assert list(row) == ["causal", "N", "triton", "flash", "sdpa"] + [
        "triton ÷ sdpa",
        "flash ÷ sdpa",
    ]


def test_the_report_lists_steps_counts_skips_and_the_table(tmp_path) -> None:
    (tmp_path / "gpu.xml").write_text(JUNIT)
    tests = gpu_report.parse_junit(tmp_path / "gpu.xml")
    steps = [
        step("pytest -m gpu", "failed", "x" * 200 + "\n2 failed, 2 passed"),
        step(gpu_report.TFLOPS_STEP, "passed"),
        step("run-all on the GPU", "timed out", "ran topology\n(killed at 5 s)"),
    ]
    rows = gpu_report.tflops_rows(RECORDS)
    text = gpu_report.report(ENV, steps, tests, rows)
    assert "NVIDIA H200" in text and "Triton 3.6.0" in text and "CUDA 13.0" in text
    assert "commit 70ca07d1a133 · 2026-12-01 12:00:07 UTC" in text
    assert "| run-all on the GPU |  | timed out | 1.0 |" in text
    assert "2 passed, 2 failed, 2 skipped" in text
    assert "- `tests.comm.test_cost_model::test_fit_on_nccl`: needs 2 CUDA GPUs" in text
    assert "| False | 4096 | 400.0 | 50.0 | 500.0 | 0.80 | 0.10 (overlap) |" in text
    assert "(killed at 5 s)" in text
    blocks = text.split("```text")[1:]
    assert all(len(line) <= 88 for b in blocks for line in b.splitlines())


def test_without_records_the_report_says_why() -> None:
    tests = {"passed": 0, "failed": 0, "skipped": 0, "skips": [], "failures": []}
    bench = step(gpu_report.TFLOPS_STEP, "failed", "error: unrecognized: --tflops")
    text = gpu_report.report({**ENV, "missing": ["altair"]}, [bench], tests, [])
    assert "Not installed here: altair." in text
    assert "No TFLOP/s: the benchmark gave no records (failed: error: unre" in text


def test_a_step_over_its_limit_is_killed_with_its_children() -> None:
    code = textwrap.dedent(
        """
        import subprocess, time
        child = subprocess.Popen(["sleep", "60"])
        print(child.pid, flush=True)
        time.sleep(60)
        """
    )
    slow = gpu_check.Step("slow", [sys.executable, "-c", code], max_s=60)
    after = gpu_check.Step("after", [sys.executable, "-c", "print('hi')"], 10, 1.5)
    start = time.monotonic()
    gpu_check.run_steps([slow, after], budget_s=5.0)
    assert time.monotonic() - start < 12
    assert slow.status == "timed out" and 3 <= slow.seconds < 6
    grandchild = int(slow.output.split()[0])
    deadline = time.monotonic() + 5
    while alive(grandchild) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not alive(grandchild)
    assert after.status == "passed" and after.output == "hi\n"


def test_a_step_with_no_budget_left_is_not_run() -> None:
    late = gpu_check.Step("late", [sys.executable, "-c", "pass"], max_s=10)
    gpu_check.run_steps([late], budget_s=0.5)
    assert late.status == "not run" and late.returncode is None


def test_main_writes_both_files_from_its_steps(tmp_path, monkeypatch) -> None:
    def fake_plan(results_dir: Path, junit: Path) -> list[gpu_check.Step]:
        py = sys.executable
        write = f"open({str(junit)!r}, 'w').write({JUNIT!r})"
        lines = "; ".join(f"print({json.dumps(r)!r})" for r in RECORDS)
        return [
            gpu_check.Step("pytest -m gpu", [py, "-c", write], 30),
            gpu_check.Step(gpu_report.TFLOPS_STEP, [py, "-c", lines], 30),
        ]

    monkeypatch.setattr(gpu_check.torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(gpu_check, "environment", lambda: ENV)
    monkeypatch.setattr(gpu_check, "plan", fake_plan)
    assert gpu_check.main(["--results", str(tmp_path)]) == 0
    text = (tmp_path / "gpu_check.md").read_text()
    record = json.loads((tmp_path / "gpu_check.json").read_text())
    assert "needs at least 2 CUDA GPUs" in text and "400.0" in text
    assert [s["status"] for s in record["steps"]] == ["passed", "passed"]
    assert record["tests"]["skipped"] == 2 and record["tflops"] == RECORDS


@pytest.mark.parametrize("bad", ["0", "-3", "soon"])
def test_a_bad_budget_is_refused_by_the_parser(bad: str, capfd) -> None:
    line = refused(["--budget", bad], capfd, entry=gpu_check.main)
    assert line.startswith("error: argument --budget")


def test_the_environment_names_the_gpu_and_the_versions(monkeypatch) -> None:
    from types import SimpleNamespace

    h200 = SimpleNamespace(name="NVIDIA H200", total_memory=140 * 2**30)
    monkeypatch.setattr(gpu_check.torch.cuda, "get_device_properties", lambda i: h200)
    monkeypatch.setattr(gpu_check.torch.cuda, "device_count", lambda: 1)
    env = gpu_check.environment()
    assert env["gpu"] == "1× NVIDIA H200, 140 GiB"
    assert env["torch"] == gpu_check.torch.__version__ and env["driver"]
    assert set(env) >= {"cpu", "python", "cuda", "triton", "utc", "missing"}
    # the provenance every result carries, built by the one function, not again here
    monkeypatch.setattr(gpu_check, "provenance", lambda b, n: {"commit": (b, n)})
    assert gpu_check.environment()["commit"] == ("none", 1)
    assert "utc" not in gpu_check.environment()


def test_the_tflops_step_runs_the_benchmark_its_spec_flags(monkeypatch) -> None:
    from types import SimpleNamespace

    from snippets.core.runtime import Spec

    step = next(s for s in gpu_check.plan(Path("r"), Path("j")) if "bench" in s.argv)
    at = step.argv.index("bench")
    assert step.argv[at + 1 :] == ["attention", "--tflops", "--json"]

    def entry(dotted: str, **flags) -> SimpleNamespace:
        module = SimpleNamespace(__name__=dotted)
        return SimpleNamespace(module=module, spec=Spec(dotted, **flags))

    fake = {"x": entry("pkg.x_bench", gpu_bench=("--fast",)), "y": entry("pkg.y")}
    monkeypatch.setattr(gpu_check, "snippets_by_name", lambda: fake)
    monkeypatch.setattr(gpu_check, "bench_modules", lambda: {"x": "pkg.x_bench"})
    assert gpu_check.gpu_bench() == ("x", ("--fast",))
    fake["y"] = entry("pkg.y_bench", gpu_bench=("--json",))
    with pytest.raises(
        RuntimeError,
        match="one benchmark sets SPEC.gpu_bench, not pkg.x_bench, pkg.y_bench",
    ):
        gpu_check.gpu_bench()


def test_the_gpu_step_runs_the_snippets_flagged_with_a_cuda_path(
    tmp_path, monkeypatch
) -> None:
    from types import SimpleNamespace

    from snippets.core.runtime import Spec

    run_all = gpu_check.plan(tmp_path, tmp_path / "gpu.xml")[-1]
    only = run_all.argv[run_all.argv.index("--only") + 1 :]
    # the five with a CUDA path: Triton kernels, the attention benchmark's CUDA
    # memory, device-copy bandwidth, the GPU's roofline, the real nvidia-smi topo -m
    want = ["attention_bench", "flash_attention_triton", "p2p_bandwidth", "roofline"]
    want += ["topology"]
    assert sorted(only) == want
    fake = {
        "a": SimpleNamespace(spec=Spec("a", gpu_path=True)),
        "b": SimpleNamespace(spec=Spec("b")),
        "c": SimpleNamespace(spec=Spec("c", gpu_path=True)),
    }
    monkeypatch.setattr(gpu_check, "snippets_by_name", lambda: fake)
    assert gpu_check.gpu_snippets() == ["a", "c"]  # by the flag, not by a name
