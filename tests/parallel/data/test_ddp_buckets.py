"""DDP buckets: against torch's own assignment and against a hand-worked example."""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist

from snippets.parallel.data import ddp_buckets

MIB = 1024 * 1024


def test_hand_worked_example() -> None:
    # float32 sizes in KiB, module order: 512, 768, 256, 1024, 300
    kib = [512, 768, 256, 1024, 300]
    params = [torch.zeros(k * 256) for k in kib]
    # Cap 1.5 MiB, first bucket 1 MiB. Backwards: 300 (<1024), +1024 = 1324 ≥ 1024
    # closes [4, 3]; then 256, +768 = 1024 < 1536, +512 = 1536 ≥ 1536 closes [2, 1, 0].
    assert ddp_buckets.assign_buckets(params, 1.5) == [[4, 3], [2, 1, 0]]
    assert ddp_buckets.bucket_bytes(params, [4, 3]) == (300 + 1024) * 1024


@pytest.mark.parametrize("cap_mb", [0.001, 0.003, 0.02])
def test_mixed_dtypes_match_torch(cap_mb: float) -> None:
    g = torch.Generator().manual_seed(0)
    sizes = torch.randint(1, 700, (23,), generator=g).tolist()
    dtypes = [torch.float32, torch.float64, torch.float16]
    params = [torch.zeros(n, dtype=dtypes[i % 3]) for i, n in enumerate(sizes)]
    first = min(ddp_buckets.FIRST_BUCKET_BYTES, int(cap_mb * MIB))
    limits = [first, int(cap_mb * MIB)]
    theirs, _ = dist._compute_bucket_assignment_by_size(params[::-1], limits)
    n = len(params)
    ours = ddp_buckets.assign_buckets(params, cap_mb)
    expected = [[n - 1 - j for j in bucket] for bucket in theirs]
    assert sorted(ours) == sorted(expected)
    for bucket in ours:
        assert len({params[i].dtype for i in bucket}) == 1


def test_small_first_bucket_starts_early() -> None:
    # 10 tensors of 100 KiB, default cap 25 MiB: first bucket closes at ≥ 1 MiB
    # (11 tensors would be needed, so all 10 land in the one open bucket), while a
    # 200 KiB first limit closes after two.
    params = [torch.zeros(100 * 256) for _ in range(10)]
    assert ddp_buckets.assign_buckets(params) == [list(range(9, -1, -1))]
    buckets = ddp_buckets.assign_buckets(params, 25.0, first_bucket_bytes=200 * 1024)
    assert buckets == [[9, 8], list(range(7, -1, -1))]
    assert sum(len(b) for b in buckets) == 10
