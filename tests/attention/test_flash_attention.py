"""Tiled FlashAttention-2, forward and backward, against SDPA."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from conftest import refused

from snippets.__main__ import main as cli_main
from snippets.attention import flash_attention as fa


def _inputs(shape_q, shape_k, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(shape_q, generator=g).to(dtype).requires_grad_()
    k = torch.randn(shape_k, generator=g).to(dtype).requires_grad_()
    v = torch.randn(shape_k, generator=g).to(dtype).requires_grad_()
    dO = torch.randn(shape_q, generator=g).to(dtype)
    return q, k, v, dO


def _reference(q, k, v, dO, causal, scale=None):
    """SDPA in fp64: the oracle, more precise than either side."""
    q64, k64, v64 = (t.detach().double().requires_grad_() for t in (q, k, v))
    out = F.scaled_dot_product_attention(q64, k64, v64, is_causal=causal, scale=scale)
    return (out, *torch.autograd.grad(out, (q64, k64, v64), dO.double()))


def _ours(q, k, v, dO, causal, **kw):
    out = fa.flash_attention(q, k, v, causal, **kw)
    return (out, *torch.autograd.grad(out, (q, k, v), dO))


# Odd lengths and small tiles: ragged last blocks, diagonal tiles that cut through a
# block, key tiles longer and shorter than query tiles.
CASES = [  # (B, H, N, M, d, block_q, block_k)
    (1, 1, 1, 1, 32, 16, 16),
    (2, 3, 97, 97, 32, 32, 16),
    (1, 2, 130, 130, 64, 64, 64),
    (2, 1, 61, 61, 48, 16, 40),
    (1, 2, 77, 77, 128, 128, 32),
    (1, 1, 50, 83, 64, 16, 32),  # N < M
    (1, 1, 83, 50, 96, 32, 16),  # N > M
]


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize(
    "case", CASES, ids=lambda c: "B{}H{}N{}M{}d{}-{}x{}".format(*c)
)
def test_fp32_tight(case, causal: bool) -> None:
    B, H, N, M, d, bq, bk = case
    q, k, v, dO = _inputs(
        (B, H, N, d), (B, H, M, d), torch.float32, seed=N * d + causal
    )
    ours = _ours(q, k, v, dO, causal, block_q=bq, block_k=bk)
    for name, a, b in zip("O dQ dK dV".split(), ours, _reference(q, k, v, dO, causal)):
        assert a.dtype == torch.float32
        torch.testing.assert_close(
            a.double(), b, rtol=1e-5, atol=2e-5, msg=lambda m: f"{name}: {m}"
        )


@pytest.mark.parametrize("causal", [False, True])
def test_fp64_to_rounding(causal: bool) -> None:
    """In fp64 any indexing or rescaling slip shows up far above the 1e-10 tolerance."""
    q, k, v, dO = _inputs((2, 3, 101, 40), (2, 3, 101, 40), torch.float64, seed=9)
    for name, a, b in zip(
        "O dQ dK dV".split(),
        _ours(q, k, v, dO, causal, block_q=32, block_k=24),
        _reference(q, k, v, dO, causal),
    ):
        assert a.dtype == torch.float64
        torch.testing.assert_close(
            a, b, rtol=1e-10, atol=1e-10, msg=lambda m: f"{name}: {m}"
        )


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_loose(dtype: torch.dtype, causal: bool) -> None:
    q, k, v, dO = _inputs((2, 2, 203, 64), (2, 2, 203, 64), dtype, seed=7)
    ours = _ours(q, k, v, dO, causal, block_q=64, block_k=48)
    ref = _reference(q, k, v, dO, causal)
    # SDPA on the same half inputs, for scale: ours must be about as good as it is.
    sdpa = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    sdpa_err = (sdpa.double() - ref[0]).abs().max().item()
    for name, a, b in zip("O dQ dK dV".split(), ours, ref):
        assert a.dtype == dtype
        err = (a.double() - b).abs().max().item()
        assert err <= 3e-2, f"{name}: max error {err:.3g}"
    assert (ours[0].double() - ref[0]).abs().max().item() <= 2 * sdpa_err + 1e-3


def test_default_blocks_and_custom_scale() -> None:
    q, k, v, dO = _inputs((1, 2, 600, 64), (1, 2, 600, 64), torch.float32, seed=3)
    for causal in (False, True):
        for a, b in zip(
            _ours(q, k, v, dO, causal, scale=0.3),
            _reference(q, k, v, dO, causal, scale=0.3),
        ):
            torch.testing.assert_close(a.double(), b, rtol=1e-5, atol=2e-5)


def test_saves_only_output_and_lse() -> None:
    q, k, v, _ = _inputs((1, 2, 300, 64), (1, 2, 300, 64), torch.float32, seed=4)
    out = fa.flash_attention(q, k, v, True, block_q=64, block_k=64)
    saved = out.grad_fn.saved_tensors
    sizes = sorted(t.numel() for t in saved)
    # q, k, v, O: N·d each; L: one number per row. Nothing N×N.
    assert sizes == sorted([300 * 64 * 2] * 4 + [300 * 2])
    assert all(t.numel() < 300 * 300 for t in saved)


@pytest.mark.parametrize(
    "bad, match",
    [
        (dict(q=(1, 1, 8, 16)), "head dim d=16"),
        (dict(q=(1, 1, 8, 256), k=(1, 1, 8, 256), v=(1, 1, 8, 256)), "head dim d=256"),
        (dict(q=(1, 1, 8, 36), k=(1, 1, 8, 36), v=(1, 1, 8, 36)), "head dim d=36"),
        (dict(q=(1, 8, 32)), r"\(B, H, N, d\)"),
        (dict(k=(1, 2, 8, 32), v=(1, 2, 8, 32)), "must agree on B, H and d"),
        (dict(v=(1, 1, 9, 32)), "k and v must have the same shape"),
    ],
)
def test_bad_shapes_raise_clear_errors(bad: dict, match: str) -> None:
    shapes = {"q": (1, 1, 8, 32), "k": (1, 1, 8, 32), "v": (1, 1, 8, 32), **bad}
    if "q" in bad and len(bad) == 1 and len(bad["q"]) == 4:
        shapes["k"] = shapes["v"] = bad["q"][:3] + (bad["q"][3],)
    with pytest.raises(ValueError, match=match):
        fa.flash_attention(*(torch.randn(shapes[n]) for n in "qkv"))


def test_bad_dtype_and_blocks() -> None:
    q = torch.randn(1, 1, 8, 32)
    with pytest.raises(TypeError, match="dtype"):
        fa.flash_attention(q, q.double(), q)
    with pytest.raises(ValueError, match="block sizes"):
        fa.flash_attention(q, q, q, block_q=0)


def test_main_checks_itself() -> None:
    rows = fa.main()["tables"]["errors"]
    assert {(r["dtype"], r["causal"]) for r in rows} == {
        (d, c) for d in ("float32", "bfloat16") for c in (False, True)
    }


def test_command_line_options(capfd) -> None:
    run = ["run", "flash_attention"]
    options = ["--seq-len", "45", "--head-dim", "32", "--block-q", "16"]
    assert cli_main([*run, *options, "--block-k", "20"]) == 0
    out, err = capfd.readouterr()
    assert "N=45 d=32, tiles 16×20" in out, err
    assert "multiple of 8" in refused([*run, "--head-dim", "20"], capfd)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize(
    "dtype,tol", [(torch.float32, 1e-4), (torch.float16, 1e-2), (torch.bfloat16, 3e-2)]
)
@pytest.mark.parametrize("causal", [False, True])
def test_on_cuda(dtype: torch.dtype, tol: float, causal: bool) -> None:
    """The tiled loops on CUDA tensors (default tiles, a ragged last one) vs SDPA in
    fp64 on the same rounded inputs; only the final rounding to dtype may differ."""
    q, k, v, dO = (
        t.detach().cuda().requires_grad_(t.requires_grad)
        for t in _inputs((2, 4, 1000, 64), (2, 4, 1000, 64), dtype, seed=11)
    )
    names = "O dQ dK dV".split()
    ours, ref = _ours(q, k, v, dO, causal), _reference(q, k, v, dO, causal)
    for name, a, b in zip(names, ours, ref):
        assert a.device.type == "cuda" and a.dtype == dtype
        err = (a.double() - b).abs().max().item()
        assert err <= tol * max(1.0, b.abs().max().item()), f"{name}: {err:.2e}"
