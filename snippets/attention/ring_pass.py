"""One hop of a ring: send a tensor to the next rank and receive the previous rank's,
started now and waited for later, so the transfer can hide behind compute.

Ring attention's communication, kept apart from its arithmetic. Peers are ranks
within ``group`` (``group_peer``), so two rings on disjoint sub-groups run at once.
"""

from __future__ import annotations

import torch
import torch.distributed as dist


# --8<-- [start:pass]
def start_pass(
    t: torch.Tensor, group: dist.ProcessGroup | None, tag: int
) -> tuple[list, torch.Tensor]:
    """Send t to the next rank and receive the previous rank's into a new buffer,
    without waiting."""
    r, p = dist.get_rank(group), dist.get_world_size(group)
    # a fresh, contiguous buffer: empty_like would copy a transposed t's strides,
    # and the backends receive only into contiguous memory
    incoming = torch.empty_like(t, memory_format=torch.contiguous_format)
    ops = [
        dist.P2POp(
            dist.isend, t.contiguous(), group=group, group_peer=(r + 1) % p, tag=tag
        ),
        dist.P2POp(dist.irecv, incoming, group=group, group_peer=(r - 1) % p, tag=tag),
    ]
    return dist.batch_isend_irecv(ops), incoming


def finish_pass(pending: tuple[list, torch.Tensor]) -> torch.Tensor:
    works, incoming = pending
    for w in works:  # every handle batch_isend_irecv returned is waited on
        w.wait()
    return incoming


# --8<-- [end:pass]
