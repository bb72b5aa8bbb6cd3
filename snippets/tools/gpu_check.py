"""``make gpu-check``: everything one CUDA GPU can run, in under 8 minutes, reported.

    python -m snippets.tools.gpu_check [--results DIR] [--budget S]

Three steps, each in its own process session with its own time limit inside one total
budget (a step that runs over is killed with everything it started):

1. ``pytest -m gpu``: the compiled Triton kernels against SDPA, tiled attention on
   CUDA, CUDA peak memory, device-copy bandwidth, the real ``nvidia-smi topo -m``.
   Tests that need two or more GPUs skip; the report lists each with its reason.
2. the benchmark whose SPEC sets ``gpu_bench``, with those options: today
   ``python -m snippets bench attention --tflops --json``, the forward's TFLOP/s beside
   SDPA's flash backend, N = 4096 to 16384, bf16.
3. ``python -m snippets run-all --force --only`` the snippets with a CUDA path
   (``SPEC.gpu_path``), so their ``results/`` come from the GPU.

It writes ``results/gpu_check.md`` (short, for a note to include; rendered by
:mod:`snippets.tools.gpu_report`) and ``results/gpu_check.json``, and exits 1 if a step
failed. Without CUDA it refuses in one line (exit status 2).
"""

from __future__ import annotations

import importlib.util
import json
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from snippets.core.cli import OneLineParser, positive_float
from snippets.core.results import provenance
from snippets.tools.gpu_report import (
    TFLOPS_STEP,
    parse_junit,
    parse_tflops,
    report,
    tflops_rows,
)
from snippets.tools.registry import bench_modules, snippets_by_name

REPO_DIR = Path(__file__).resolve().parents[2]
BUDGET_S = 450.0  # all steps together: 8 minutes, less start-up and the report


@dataclass
class Step:
    name: str
    argv: list[str]
    max_s: float  # never longer than this
    reserve_s: float = 0.0  # kept back for it while the steps before it run
    what: str = ""  # for the report: what the step covers
    status: str = "not run"  # passed, failed, timed out, not run
    seconds: float = 0.0
    returncode: int | None = None
    output: str = field(default="", repr=False)


def plan(results_dir: Path, junit: Path) -> list[Step]:
    py = [sys.executable]
    pytest = ["-m", "pytest", "-m", "gpu", "-rs", "-q", "-p", "no:cacheprovider"]
    pytest += ["--junitxml", str(junit), "--continue-on-collection-errors"]
    pytest += ["--ignore=tests/site", "tests"]  # the site's tests need no GPU
    bench, options = gpu_bench()
    tflops = ["-m", "snippets", "bench", bench, *options]
    run_all = ["-m", "snippets", "run-all", "--force", "--results", str(results_dir)]
    snippets = gpu_snippets()
    run_all += ["--per-snippet-timeout", "150", "--only", *snippets]
    return [
        Step("pytest -m gpu", py + pytest, max_s=240, what="tests marked gpu"),
        Step(TFLOPS_STEP, py + tflops, 120, 60, " ".join(tflops[3:])),
        Step("run-all on the GPU", py + run_all, 200, 60, ", ".join(snippets)),
    ]


def gpu_bench() -> tuple[str, tuple[str, ...]]:
    """The one benchmark whose SPEC names options for the TFLOP/s step
    (``SPEC.gpu_bench``): its ``BENCH`` name and those options."""
    flagged = {
        e.module.__name__: e.spec.gpu_bench
        for e in snippets_by_name().values()
        if e.spec.gpu_bench
    }
    by_module = {dotted: name for name, dotted in bench_modules().items()}
    if len(flagged) != 1 or not set(flagged) <= set(by_module):
        found = ", ".join(sorted(flagged)) or "none"
        raise RuntimeError(f"one benchmark sets SPEC.gpu_bench, not {found}")
    [(dotted, options)] = flagged.items()
    return by_module[dotted], options


def gpu_snippets() -> list[str]:
    """The snippets with a CUDA path (``SPEC.gpu_path``): they run here so that their
    results come from the GPU."""
    return [n for n, e in snippets_by_name().items() if e.spec.gpu_path]


def run_step(step: Step, limit_s: float) -> Step:
    """Run ``step.argv`` for at most ``limit_s`` seconds, then kill its session."""
    start = time.monotonic()
    proc = subprocess.Popen(
        step.argv,
        cwd=REPO_DIR,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        step.output, _ = proc.communicate(timeout=max(limit_s, 1.0))
        step.returncode = proc.returncode
        step.status = "passed" if proc.returncode == 0 else "failed"
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # the step and every process it started
        step.output = (proc.communicate()[0] or "") + f"\n(killed at {limit_s:.0f} s)"
        step.status = "timed out"
    step.seconds = round(time.monotonic() - start, 1)
    return step


def run_steps(steps: list[Step], budget_s: float) -> list[Step]:
    """Each step gets what is left of the budget, less what the later ones reserve."""
    deadline = time.monotonic() + budget_s
    for i, step in enumerate(steps):
        later = sum(s.reserve_s for s in steps[i + 1 :])
        limit = min(step.max_s, deadline - time.monotonic() - later)
        if limit < 1:
            step.status, step.output = "not run", "no time left in the budget"
            continue
        run_step(step, limit)
        print(f"{step.name}: {step.status} in {step.seconds:.1f} s", flush=True)
    return steps


def environment() -> dict:
    props = torch.cuda.get_device_properties(0)
    try:
        import triton

        triton_version = triton.__version__
    except ImportError:
        triton_version = "not installed"
    try:
        driver = (
            subprocess.run(
                ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                capture_output=True,
                text=True,
                timeout=20,
            )
            .stdout.strip()
            .splitlines()[0]
        )
    except (OSError, IndexError, subprocess.SubprocessError):
        driver = "unknown"
    needed = ("altair", "pytest", "tqdm", "triton")  # what the steps import
    missing = [name for name in needed if importlib.util.find_spec(name) is None]
    return provenance("none", 1) | {  # device, torch, Python, commit, time; and:
        "missing": missing,
        "gpu": f"{torch.cuda.device_count()}× {props.name}, "
        f"{props.total_memory / 2**30:.0f} GiB",
        "cpu": f"{platform.machine()}, {os.cpu_count()} cores",
        "driver": driver,
        "cuda": torch.version.cuda or "none",
        "triton": triton_version,
    }


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(prog="python -m snippets.tools.gpu_check")
    parser.add_argument("--results", default=str(REPO_DIR / "results"), metavar="DIR")
    parser.add_argument("--budget", type=positive_float, default=BUDGET_S, metavar="S")
    opts = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("error: needs a CUDA GPU; this machine has none", file=sys.stderr)
        return 2
    results_dir = Path(opts.results).resolve()
    results_dir.mkdir(parents=True, exist_ok=True)
    env = environment()
    print(f"gpu-check on {env['gpu']}, budget {opts.budget:.0f} s", flush=True)
    with tempfile.TemporaryDirectory(prefix="gpu-check-") as tmp:
        junit = Path(tmp) / "gpu.xml"
        steps = plan(results_dir, junit)
        run_steps(steps, opts.budget)
        tests = parse_junit(junit)
    done = [asdict(s) for s in steps]
    bench = next(s for s in done if s["name"] == TFLOPS_STEP)
    records = parse_tflops(bench["output"])
    roof_file = results_dir / "roofline.json"
    roof = json.loads(roof_file.read_text())["result"] if roof_file.exists() else None
    published = roof.get("published", {}) if roof else {}  # the vendor's, as cited
    text = report(env, done, tests, tflops_rows(records), roof, published)
    (results_dir / "gpu_check.md").write_text(text, encoding="utf-8")
    for s in done:
        s["output"] = s["output"][-4000:]
    record = {"environment": env, "steps": done, "tests": tests, "tflops": records}
    (results_dir / "gpu_check.json").write_text(json.dumps(record, indent=2) + "\n")
    print(text)
    return 0 if all(s.status == "passed" for s in steps) else 1


if __name__ == "__main__":
    sys.exit(main())
