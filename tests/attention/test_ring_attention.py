"""Ring attention on 2–4 gloo ranks against SDPA on the whole gathered sequence."""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist
import torch.nn.functional as F

from snippets.attention import ring_attention as ra
from snippets.attention.zigzag_layout import zigzag_shard
from snippets.core.runtime import device, launch


def _check(
    seed: int,
    B: int,
    H: int,
    chunk: int,
    d: int,
    causal: bool,
    dtype: torch.dtype,
    group: dist.ProcessGroup | None = None,
) -> float:
    """Ring attention on this rank's zig-zag shard vs SDPA (fp64) on the full sequence;
    returns the largest error over O, dQ, dK, dV, gathered across the group."""
    rank, p = dist.get_rank(group), dist.get_world_size(group)
    g = torch.Generator().manual_seed(seed)
    N = 2 * p * chunk
    q, k, v, dO = (torch.randn(B, H, N, d, generator=g) for _ in range(4))
    mine = [zigzag_shard(t, rank, p).to(dtype).requires_grad_() for t in (q, k, v)]
    out = ra.ring_attention(*mine, causal=causal, group=group)
    assert out.dtype == dtype and out.shape == mine[0].shape
    grads = torch.autograd.grad(out, mine, zigzag_shard(dO, rank, p).to(dtype))

    q64, k64, v64 = (t.to(dtype).double().requires_grad_() for t in (q, k, v))
    ref = F.scaled_dot_product_attention(q64, k64, v64, is_causal=causal)
    ref_grads = torch.autograd.grad(ref, (q64, k64, v64), dO.to(dtype).double())
    errs = [
        (a.double() - zigzag_shard(b, rank, p)).abs().max()
        for a, b in zip((out, *grads), (ref, *ref_grads))
    ]
    worst = torch.stack(errs).max().float()
    dist.all_reduce(worst, op=dist.ReduceOp.MAX, group=group)
    return worst.item()


def _all_checks(with_subgroups: bool) -> dict:
    results = {}
    for causal in (False, True):
        for chunk, d in (
            (1, 32),
            (13, 64),
            (9, 128),
        ):  # chunk 1: every rank holds 2 rows
            results[f"fp32 causal={causal} chunk={chunk} d={d}"] = (
                _check(chunk, 2, 3, chunk, d, causal, torch.float32),
                1e-5,
            )
        results[f"bf16 causal={causal}"] = (
            _check(11, 1, 2, 21, 64, causal, torch.bfloat16),
            4e-2,
        )
        results[f"fp64 causal={causal}"] = (
            _check(12, 1, 2, 5, 32, causal, torch.float64),
            1e-10,
        )
    if (
        with_subgroups
    ):  # two rings at once on disjoint groups: peers are group ranks, not world ranks
        rank, p = dist.get_rank(), dist.get_world_size()
        groups = [
            dist.new_group([r for r in range(p) if r % 2 == parity])
            for parity in (0, 1)
        ]
        results["sub-group causal"] = (
            _check(5 + rank % 2, 1, 2, 7, 32, True, torch.float32, groups[rank % 2]),
            1e-5,
        )
    return results


@pytest.mark.parametrize("p", [2, 3, 4])
def test_matches_sdpa_forward_and_backward(p: int) -> None:
    results = launch(_all_checks, p, backend="gloo", timeout_s=60, args=(p == 4,))
    for name, (err, tol) in results[0].items():
        assert err <= tol, f"{p} ranks, {name}: max error {err:.3g} > {tol}"


def _world_one() -> float:
    return _check(3, 1, 1, 5, 32, True, torch.float32)


def test_single_rank_is_plain_attention() -> None:
    assert launch(_world_one, 1, backend="gloo", timeout_s=30)[0] <= 1e-5


def test_bad_input() -> None:
    q = torch.randn(1, 1, 5, 32)
    with pytest.raises(ValueError, match="even local length"):
        ra.ring_attention(q, q, q, causal=True)
    with pytest.raises(ValueError, match="one shape"):
        ra.ring_attention(q, torch.randn(1, 1, 6, 32), torch.randn(1, 1, 6, 32))
    with pytest.raises(ValueError, match="head dim"):
        ra.ring_attention(*(torch.randn(1, 1, 4, 16) for _ in range(3)))


def test_main_checks_itself() -> None:
    result = launch(ra.main, 3, backend="gloo", timeout_s=60)[0]
    assert [r["causal"] for r in result["tables"]["errors"]] == [False, True]
    assert len({b["zig-zag"] for b in result["tables"]["balance"]}) == 1


def _nccl_checks() -> dict:
    assert device().type == "cuda"
    return {causal: _check_on(device(), causal) for causal in (False, True)}


def _check_on(dev: torch.device, causal: bool) -> float:
    rank, p = dist.get_rank(), dist.get_world_size()
    g = torch.Generator().manual_seed(21)
    q, k, v = (
        torch.randn(2, 4, 2 * p * 100, 64, generator=g).to(dev) for _ in range(3)
    )
    mine = [zigzag_shard(t, rank, p).requires_grad_() for t in (q, k, v)]
    out = ra.ring_attention(*mine, causal=causal)
    out.sum().backward()
    ref = [t.requires_grad_() for t in (q, k, v)]
    F.scaled_dot_product_attention(*ref, is_causal=causal).sum().backward()
    return max(
        (a - zigzag_shard(b, rank, p)).abs().max().item()
        for a, b in zip([m.grad for m in mine], [r.grad for r in ref])
    )


@pytest.mark.gpu
@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs 2 CUDA GPUs")
def test_on_nccl() -> None:
    for errors in launch(_nccl_checks, 2, backend="nccl", timeout_s=120):
        assert max(errors.values()) <= 1e-3
