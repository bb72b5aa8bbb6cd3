"""FlashAttention-2 Triton kernels against F.scaled_dot_product_attention.

Without a GPU the module runs its kernels under Triton's interpreter (it sets
TRITON_INTERPRET=1 at import), so these checks run on every push; with a GPU the same
checks run on compiled kernels (the ``gpu`` tests, bf16 included). Shapes are small and
odd: N not a multiple of the tiles, head dims that are not powers of two, B·H > 1.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

import snippets.attention.flash_attention_triton as fat

REPO = Path(__file__).resolve().parents[2]
needs_triton = pytest.mark.skipif(
    not fat.HAVE_TRITON, reason="Triton is not installed (pip install -e '.[triton]')"
)
needs_interpreter = pytest.mark.skipif(
    not fat.INTERPRETED, reason="the kernels are compiled here; see the gpu tests"
)
needs_cuda = pytest.mark.skipif(
    not (fat.HAVE_TRITON and torch.cuda.is_available() and not fat.INTERPRETED),
    reason="needs CUDA and compiled Triton kernels",
)
TOL = {
    torch.float32: 2e-5,
    torch.float16: 1e-2,
    torch.bfloat16: 5e-2,
}  # × max(1, |reference|)


def _inputs(shape, dtype, device, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return [
        torch.randn(*shape, generator=gen).to(device, dtype) for _ in range(4)
    ]  # q, k, v, dO


def _compare(shape, causal, dtype, device):
    q, k, v, do = _inputs(shape, dtype, device)
    ours_in = [t.clone().requires_grad_() for t in (q, k, v)]
    out = fat.flash_attention_triton(*ours_in, causal=causal)
    out.backward(do)
    # The oracle: torch's own attention in float64 on the same (rounded) inputs.
    ref_in = [t.detach().double().requires_grad_() for t in (q, k, v)]
    ref = F.scaled_dot_product_attention(*ref_in, is_causal=causal)
    ref.backward(do.double())
    assert out.shape == q.shape and out.dtype == dtype
    for name, got, want in [("out", out, ref)] + [
        (n, a.grad, b.grad) for n, a, b in zip("qkv", ours_in, ref_in)
    ]:
        scale = max(1.0, want.abs().max().item())
        err = (got.double() - want).abs().max().item()
        assert err <= TOL[dtype] * scale, (
            f"{name}: max |Δ| = {err:.2e} for {shape} causal={causal} {dtype}"
        )


CPU_CASES = [  # (B, H, N, d), causal, dtype
    ((1, 1, 1, 32), False, torch.float32),
    ((1, 1, 1, 32), True, torch.float32),
    ((2, 3, 17, 32), False, torch.float32),
    ((2, 3, 17, 32), True, torch.float32),
    ((1, 2, 33, 48), True, torch.float32),  # d = 48 is padded to 64 inside the kernel
    ((1, 1, 40, 64), False, torch.float32),
    ((1, 1, 21, 128), True, torch.float32),
    ((1, 2, 29, 32), False, torch.float16),
    ((1, 2, 29, 32), True, torch.float16),
]


@needs_triton
@needs_interpreter
@pytest.mark.parametrize(
    "shape,causal,dtype", CPU_CASES, ids=lambda x: str(x).removeprefix("torch.")
)
def test_interpreted_kernels_match_sdpa(shape, causal, dtype):
    _compare(shape, causal, dtype, torch.device("cpu"))


@needs_triton
@needs_interpreter
def test_non_contiguous_inputs():
    x = torch.randn(
        1, 19, 2, 32, requires_grad=True
    )  # (B, N, H, d) seen as (B, H, N, d): strided
    q = k = v = x.transpose(1, 2)
    out = fat.flash_attention_triton(q, k, v, causal=True)
    out.sum().backward()
    ref_x = x.detach().clone().requires_grad_()
    r = ref_x.transpose(1, 2)
    ref = F.scaled_dot_product_attention(r, r, r, is_causal=True)
    ref.sum().backward()
    torch.testing.assert_close(out, ref, atol=2e-5, rtol=2e-5)
    torch.testing.assert_close(x.grad, ref_x.grad, atol=2e-5, rtol=2e-5)


@needs_triton
@needs_interpreter
def test_saves_nothing_quadratic():
    """The autograd graph keeps q, k, v, O and the log-sum-exp: O(N·d), never N×N."""
    B, H, N, d = 1, 1, 48, 16
    saved = []

    def pack(t):
        saved.append(t.numel())
        return t

    q, k, v = (torch.randn(B, H, N, d, requires_grad=True) for _ in range(3))
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        fat.flash_attention_triton(q, k, v)
    assert saved and max(saved) == B * H * N * d < N * N


@needs_triton
@pytest.mark.parametrize(
    "args,error,match",
    [
        (((1, 1, 8, 32), (1, 1, 9, 32), (1, 1, 8, 32)), ValueError, "one shape"),
        (((1, 8, 32), (1, 8, 32), (1, 8, 32)), ValueError, r"\(B, H, N, d\)"),
        (((1, 1, 8, 8),) * 3, ValueError, "head dim"),
        (((1, 1, 8, 256),) * 3, ValueError, "head dim"),
    ],
)
def test_bad_shapes_are_refused(args, error, match):
    q, k, v = (torch.randn(*s) for s in args)
    with pytest.raises(error, match=match):
        fat.flash_attention_triton(q, k, v)


@needs_triton
def test_bad_dtypes_are_refused():
    q = torch.randn(1, 1, 8, 32)
    with pytest.raises(TypeError, match="dtype"):
        fat.flash_attention_triton(q, q.half(), q)
    with pytest.raises(TypeError, match="dtype"):
        fat.flash_attention_triton(*(torch.ones(1, 1, 8, 32, dtype=torch.int32),) * 3)
    if fat.INTERPRETED:
        with pytest.raises(TypeError, match="bf16"):
            fat.flash_attention_triton(*(q.bfloat16(),) * 3)


def _run(
    code_or_args: list[str], env: dict | None = None
) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, *code_or_args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=240,
        env={**os.environ, **(env or {})},
    )


@needs_triton
def test_main_runs_the_interpreted_check_from_the_command_line():
    proc = _run(
        ["-m", "snippets.attention.flash_attention_triton"],
        env={"TRITON_INTERPRET": "1"},
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "interpreted" in proc.stdout and proc.stdout.count("✓") == 4


def test_without_triton_the_module_imports_and_explains():
    code = (
        "import sys; sys.modules['triton'] = None\n"  # makes `import triton` fail
        "import torch, snippets.attention.flash_attention_triton as m\n"
        "none = {'triton': None, 'checked': False, 'tables': {'check': []}}\n"
        "assert m.main() == none\n"
        "try:\n    m.flash_attention_triton(*(torch.randn(1, 1, 4, 32),) * 3)\n"
        "except RuntimeError as e:\n    print('refused:', e)\n"
    )
    proc = _run(["-c", code])
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "Triton is not installed" in proc.stdout
    assert "refused:" in proc.stdout and "pip install" in proc.stdout


@pytest.mark.gpu
@needs_cuda
@pytest.mark.parametrize(
    "dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str
)
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize(
    "shape",
    [(2, 3, 1000, 64), (1, 2, 257, 128), (1, 1, 130, 80)],  # 80: padded to 128
    ids=str,
)
def test_compiled_kernels_match_sdpa(shape, causal, dtype):
    _compare(shape, causal, dtype, torch.device("cuda"))
