"""Triton support: the log2 constant, the interpreter the package picks without a GPU
(seen from a fresh interpreter), a kernel through ``jit`` against torch, and the
fallback without Triton."""

from __future__ import annotations

import importlib.util
import math
import os
import subprocess
import sys

import pytest
import torch

import snippets  # noqa: F401  (sets TRITON_INTERPRET=1 before Triton loads)
from snippets.attention import triton_support as ts


def test_log2e_turns_exp_into_exp2():
    assert ts.LOG2E == pytest.approx(1 / math.log(2), rel=1e-15)
    x = 1.7
    assert 2 ** (x * ts.LOG2E) == pytest.approx(math.exp(x), rel=1e-14)


@pytest.mark.skipif(not ts.HAVE_TRITON, reason="needs Triton installed")
def test_without_a_gpu_importing_the_package_picks_the_interpreter() -> None:
    """A fresh interpreter that sees no GPU and was told nothing: after ``import
    snippets`` Triton interprets, so a kernel can run on CPU tensors."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["CUDA_VISIBLE_DEVICES"] = ""  # no GPU, even on a machine that has one
    probe = (
        "import snippets, os\n"
        "from snippets.attention import triton_support as ts\n"
        "print(os.environ.get('TRITON_INTERPRET'), ts.INTERPRETED, ts.COMPILED)"
    )
    run = subprocess.run(
        [sys.executable, "-c", probe], env=env, capture_output=True, text=True
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["1", "True", "False"]


@pytest.mark.skipif(
    not (ts.INTERPRETED or (ts.HAVE_TRITON and torch.cuda.is_available())),
    reason="needs Triton (interpreted on a CPU, or compiled with CUDA)",
)
def test_a_jit_kernel_runs_and_matches_torch():
    tl = ts.tl

    @ts.jit
    def axpy(X, Y, OUT, a, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        ok = offs < n
        x = tl.load(X + offs, mask=ok)
        tl.store(OUT + offs, a * x + tl.load(Y + offs, mask=ok), mask=ok)

    dev = "cpu" if ts.INTERPRETED else "cuda"
    x, y = torch.randn(37, device=dev), torch.randn(37, device=dev)
    out = torch.full_like(x, float("nan"))
    axpy[(ts.triton.cdiv(37, 16),)](x, y, out, 2.5, 37, BLOCK=16)
    torch.testing.assert_close(out, 2.5 * x + y)


def test_without_triton_jit_returns_the_function_itself(monkeypatch):
    monkeypatch.setitem(sys.modules, "triton", None)  # `import triton` now fails
    monkeypatch.setitem(sys.modules, "triton.language", None)
    spec = importlib.util.spec_from_file_location("_ts_no_triton", ts.__file__)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert not mod.HAVE_TRITON and not mod.INTERPRETED and not mod.COMPILED
    assert mod.triton is None and mod.tl is None

    def f(x):
        return x + 1

    assert mod.jit(f) is f and f(2) == 3
