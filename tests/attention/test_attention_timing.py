"""Measuring attention: the naive reference, the FLOP count, the check against SDPA,
and the peak memory of naive vs tiled attention (CPU profiler; CUDA allocator)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode

from snippets.attention import attention_timing as at
from snippets.core.measure import peak_memory_bytes

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")


@pytest.mark.parametrize("N,causal", [(1, False), (37, False), (37, True), (130, True)])
def test_naive_attention_is_attention(N, causal):
    q, k, v = (torch.randn(2, 3, N, 32, dtype=torch.float64) for _ in range(3))
    ref = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    torch.testing.assert_close(at.naive_attention(q, k, v, causal), ref)


def test_flop_count_matches_torchs_counter():
    """Forward = two N×N×d matmuls = 4·B·H·N²·d, as torch's own FLOP counter counts
    them; forward + backward is 3.5× that; causal halves both."""
    B, H, N, d = 2, 3, 40, 32
    q, k, v = (torch.randn(B, H, N, d) for _ in range(3))
    with FlopCounterMode(display=False) as counter:
        at.naive_attention(q, k, v)
    counted = counter.get_total_flops()
    assert counted == 4 * B * H * N * N * d
    assert at.forward_flops(B, H, N, d, causal=False) == counted
    assert at.forward_flops(B, H, N, d, causal=True) == counted / 2
    assert at.attention_flops(B, H, N, d, causal=False) == 3.5 * counted
    assert at.attention_flops(B, H, N, d, causal=True) == 3.5 * counted / 2


def test_measure_refuses_a_wrong_implementation():
    def wrong(q, k, v, causal):
        return F.scaled_dot_product_attention(q, k, v, is_causal=not causal)

    impls = {"sdpa": at.sdpa, "wrong": wrong}
    cpu = torch.device("cpu")
    with pytest.raises(AssertionError, match="wrong N=33"):
        at.measure(impls, 1, 2, 33, 32, False, torch.float32, cpu, iters=1)


def test_measure_times_alternately_and_records_ratios(monkeypatch):
    """One timed call per implementation per round, in turn; ratios from the medians."""
    calls = []
    fake = iter([3.0, 1.0, 2.0, 6.0, 1.0, 4.0, 3.0, 1.0, 2.0])  # naive, sdpa, flash...

    def timer(step, *, warmup, iters, device):
        calls.append(step)
        return next(fake)

    monkeypatch.setattr(at, "time_it", timer)
    impls = {n: f for n, f in at.implementations(16, 16).items() if n != "triton"}
    impls = {n: impls[n] for n in ("naive", "sdpa", "flash")}
    records = at.measure(
        impls, 1, 1, 20, 32, True, torch.float32, torch.device("cpu"), iters=3
    )
    assert len(calls) == 9 and len(set(calls[:3])) == 3 and calls[:3] == calls[3:6]
    by = {r["impl"]: r for r in records}
    assert [by[n]["time_s"] for n in ("naive", "sdpa", "flash")] == [3.0, 1.0, 2.0]
    assert by["flash"]["time_vs_sdpa"] == 2.0 and by["sdpa"]["time_vs_sdpa"] == 1.0
    # round by round flash ÷ sdpa is 2, 4, 2: median 2, quartiles 2 and 3
    assert by["flash"]["time_vs_sdpa_rounds"] == [2.0, 2.0, 3.0]
    assert by["naive"]["time_vs_sdpa_rounds"] == [3.0, 3.0, 4.5]
    assert by["naive"]["tflops"] == at.attention_flops(1, 1, 20, 32, True) / 3 / 1e12


def _peaks(N: int, device: torch.device) -> tuple[int, int]:
    q, k, v, do = (torch.randn(1, 1, N, 64, device=device) for _ in range(4))
    q, k, v = (t.requires_grad_() for t in (q, k, v))
    impls = at.implementations(block_q=128, block_k=128)
    naive = at.fwd_bwd(impls["naive"], q, k, v, do, False)
    tiled = at.fwd_bwd(impls["flash"], q, k, v, do, False)
    naive(), tiled()  # warm up: cuBLAS's workspace is allocated on the first matmul
    return peak_memory_bytes(naive, device), peak_memory_bytes(tiled, device)


def test_measured_memory_grows_with_n_squared_only_for_naive():
    """The meter on a known allocation first, then the claim itself at one N."""
    N = 1024
    one_matrix = 4 * N * N  # one fp32 N×N matrix
    assert peak_memory_bytes(lambda: torch.empty(1, 1, N, N)) == one_matrix
    naive, tiled = _peaks(N, torch.device("cpu"))
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
