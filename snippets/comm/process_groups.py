"""Process groups: who am I, how many are we, and how do some of us talk alone.

Every rank reports its rank, local rank, host and device; the world all-reduces the
ranks (the answer must be p(p-1)/2); then the ranks split into two sub-groups, evens
and odds, and each sub-group all-reduces on its own. Locally or under torchrun:

    python -m snippets run process_groups           # 4 local ranks (gloo on a CPU)
    torchrun --nproc-per-node 4 -m snippets run process_groups
"""

from __future__ import annotations

import os
import socket

import torch
import torch.distributed as dist

from snippets.core.claims import law
from snippets.core.cli import main_entry
from snippets.core.parts import Excerpt
from snippets.core.runtime import Spec, device, print0

SPEC = Spec(
    summary="ranks, world size, backend, and sub-groups that all-reduce on their own",
    world_size=4,
)


# --8<-- [start:who]
def who_am_i() -> dict:
    """What one rank knows about itself once the group exists."""
    return {
        "rank": dist.get_rank(),  # 0 … p-1 across every node
        # which GPU on this node
        "local_rank": int(os.environ.get("LOCAL_RANK", dist.get_rank())),
        "host": socket.gethostname(),
        "backend": dist.get_backend(),
        "device": str(device()),
    }


# --8<-- [end:who]


# --8<-- [start:subgroups]
def parity_groups(world_size: int) -> dict[int, dist.ProcessGroup]:
    """Evens and odds. Every rank must call new_group for every group, in the same
    order, even for the groups it is not in: creating a group is itself a collective."""
    return {
        parity: dist.new_group([r for r in range(world_size) if r % 2 == parity])
        for parity in (0, 1)
        if parity < world_size
    }


def sum_of_ranks(group: dist.ProcessGroup | None = None) -> float:
    t = torch.tensor([float(dist.get_rank())], device=device())
    dist.all_reduce(t, group=group)  # group=None means the whole world
    return t.item()


# --8<-- [end:subgroups]


def main() -> dict:
    rank, p = dist.get_rank(), dist.get_world_size()
    me = who_am_i()
    total = sum_of_ranks()
    law(
        total == p * (p - 1) / 2,
        f"world all-reduce gave {total}, expected p(p-1)/2 = {p * (p - 1) / 2}",
    )

    groups = parity_groups(p)
    mine = groups[rank % 2]
    members = dist.get_process_group_ranks(mine)
    in_group = sum_of_ranks(mine)
    law(
        in_group == sum(members),
        f"sub-group all-reduce gave {in_group}, expected {sum(members)}",
    )
    me.update(
        group="evens" if rank % 2 == 0 else "odds",
        group_rank=dist.get_rank(mine),
        group_size=dist.get_world_size(mine),
        group_sum=in_group,
    )

    rows: list = [None] * p
    dist.all_gather_object(rows, me)  # rank 0 collects everyone's view for the table
    said = Excerpt()  # what the note shows: the world, its sum, the hosts
    said(f"world: {p} ranks, backend {me['backend']}")
    said(f"  all_reduce(rank) = {total:g} = p(p-1)/2 ✓")
    for row in rows:
        print0(
            f"  rank {row['rank']} (local {row['local_rank']}, {row['device']}): "
            f"{row['group']} rank {row['group_rank']}/{row['group_size']}, "
            f"group sum {row['group_sum']:g} ✓"
        )
    hosts = sorted({row["host"] for row in rows})
    said(f"hosts: {', '.join(hosts)}"[:88])
    return {
        "tables": {"ranks": rows},
        "excerpts": {"summary": said.lines},
        "world_size": p,
        "world_sum": total,
    }


if __name__ == "__main__":
    raise SystemExit(main_entry(main, SPEC))
