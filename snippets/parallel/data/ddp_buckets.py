"""Which gradients travel together: DDP's bucket assignment, as torch computes it.

Backward produces gradients roughly in reverse order of ``module.parameters()`` (the
last layer first), so the buckets are filled walking the parameters backwards. A bucket
closes as soon as it holds at least its limit in bytes (so it may overshoot by one
tensor); the first bucket's limit is small (1 MiB, torch's
``dist._DEFAULT_FIRST_BUCKET_BYTES``, or the cap if that is smaller), so the first
all-reduce starts early, and every later one is ``bucket_cap_mb`` (25 MiB by default).
A bucket holds one dtype and one device. The test compares this with torch's own
``dist._compute_bucket_assignment_by_size`` on the same reversed list.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from snippets.core.runtime import UsageError

MIB = 1024 * 1024
FIRST_BUCKET_BYTES = 1 * MIB  # torch: dist._DEFAULT_FIRST_BUCKET_BYTES


# --8<-- [start:assign]
def assign_buckets(
    params: Sequence[torch.Tensor],
    bucket_cap_mb: float = 25.0,
    first_bucket_bytes: int = FIRST_BUCKET_BYTES,
) -> list[list[int]]:
    """Indices into ``params`` (in ``module.parameters()`` order), bucket by bucket in
    the order backward fills them: the last parameters first."""
    if not bucket_cap_mb > 0:
        raise UsageError(f"bucket_cap_mb must be more than 0, got {bucket_cap_mb}")
    cap = int(bucket_cap_mb * MIB)
    limits = [min(first_bucket_bytes, cap), cap]  # torch: [first, cap] even if cap <
    open_: dict[tuple, list[int]] = {}  # (dtype, device) → indices of the open bucket
    filled: dict[tuple, int] = {}  # bytes in that open bucket
    seen: dict[tuple, int] = {}  # buckets closed so far, per kind: picks the limit
    buckets: list[list[int]] = []
    for i in reversed(range(len(params))):
        t = params[i]
        kind = (t.dtype, t.device)
        open_.setdefault(kind, []).append(i)
        filled[kind] = filled.get(kind, 0) + t.numel() * t.element_size()
        if filled[kind] >= limits[min(seen.get(kind, 0), 1)]:  # close it
            buckets.append(open_.pop(kind))
            filled[kind] = 0
            seen[kind] = seen.get(kind, 0) + 1
    buckets.extend(open_.values())  # the last, partly filled ones
    return buckets


# --8<-- [end:assign]


def bucket_bytes(params: Sequence[torch.Tensor], bucket: list[int]) -> int:
    return sum(params[i].numel() * params[i].element_size() for i in bucket)
