"""All-to-all with uneven splits, from send/recv: what routing tokens to experts needs.

``all_to_all_single(output, input, output_split_sizes, input_split_sizes, group)`` has
the contract of ``torch.distributed.all_to_all_single``: rank i cuts ``input`` along
dim 0 into p row blocks of ``input_split_sizes`` (equal blocks when ``None``), sends
block j to rank j, and stacks what it receives, in rank order, into ``output``
according to ``output_split_sizes``. Blocks may differ in size per pair and may be
empty. Rank i's ``input_split_sizes[j]`` must equal rank j's ``output_split_sizes[i]``:
the ranks ``agree`` on all sizes first, so a mismatch raises the same one-line error
on every rank instead of hanging one of them.

The schedule is the collectives note's pairwise exchange (Thakur, Rabenseifner & Gropp
2005): in step k every rank sends to the rank k to its right and receives from the
rank k to its left, so each pair meets exactly once; empty blocks send nothing.

    python -m snippets run all_to_all -n 4
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from snippets.comm.messages import wait_all
from snippets.comm.plumbing import agree, group_ranks
from snippets.core.claims import law
from snippets.core.cli import main_entry
from snippets.core.runtime import Spec, device, print0

SPEC = Spec(
    summary="all_to_all_single with uneven and empty splits, from send/recv",
    world_size=4,
)


# --8<-- [start:splits]
def split_sizes(sizes: list[int] | None, rows: int, p: int, what: str) -> list[int]:
    """The row blocks, checked: given sizes must be p counts ≥ 0 that sum to ``rows``;
    ``None`` means p equal blocks, so ``rows`` must divide by p."""
    if sizes is None:
        if rows % p:
            raise ValueError(f"{what}: {rows} rows do not split into {p} equal blocks")
        return [rows // p] * p
    sizes = [int(s) for s in sizes]
    if len(sizes) != p or min(sizes) < 0 or sum(sizes) != rows:
        raise ValueError(
            f"{what} must be {p} counts ≥ 0 summing to {rows} rows, got {sizes}"
        )
    return sizes


def all_to_all_single(
    output: torch.Tensor,
    input: torch.Tensor,
    output_split_sizes: list[int] | None = None,
    input_split_sizes: list[int] | None = None,
    group: dist.ProcessGroup | None = None,
    check: bool = True,
) -> None:
    """Rank i's block j of ``input`` lands in rank j's block i of ``output``.
    ``check=False`` skips the ranks' agreement on sizes (one round of tiny messages):
    as with torch's own, a mismatch then hangs instead of raising."""
    ranks, me = group_ranks(group)
    p = len(ranks)
    problem, sends, recvs = "", [0] * p, [0] * p
    try:
        if input.dim() == 0 or output.dim() == 0:
            raise ValueError(
                "all_to_all_single splits dim 0: give tensors, not scalars"
            )
        if output.shape[1:] != input.shape[1:] or output.dtype != input.dtype:
            raise ValueError(
                f"output {tuple(output.shape)} {output.dtype} and input "
                f"{tuple(input.shape)} {input.dtype} differ past dim 0"
            )
        rows_in, rows_out = input.shape[0], output.shape[0]
        sends = split_sizes(input_split_sizes, rows_in, p, "input_split_sizes")
        recvs = split_sizes(output_split_sizes, rows_out, p, "output_split_sizes")
    except ValueError as exc:
        problem = str(exc)
    if problem and not check:
        raise ValueError(problem)
    bad = []
    if check:  # seen[i][j]: i → j; seen[j][p + i]: j ← i
        seen = agree(sends + recvs, problem, group)
        bad = [
            (i, j) for i in range(p) for j in range(p) if seen[i][j] != seen[j][p + i]
        ]
    if bad:
        i, j = bad[0]
        raise ValueError(
            f"all_to_all_single: rank {ranks[i]} sends {seen[i][j]} rows to rank "
            f"{ranks[j]}, which expects {seen[j][p + i]}"
        )
    src, dst = input.contiguous(), output
    starts_in = [sum(sends[:j]) for j in range(p)]
    starts_out = [sum(recvs[:j]) for j in range(p)]
    staged = []  # receive into contiguous blocks; copy into ``output`` afterwards
    works = []
    for k in range(1, p):  # step k: send k ranks to my right, receive from k left
        to, frm = (me + k) % p, (me - k) % p
        if sends[to]:
            block = src.narrow(0, starts_in[to], sends[to])
            works.append(dist.isend(block, ranks[to], group=group))
        if recvs[frm]:
            into = torch.empty_like(dst.narrow(0, starts_out[frm], recvs[frm]))
            works.append(dist.irecv(into, ranks[frm], group=group))
            staged.append((frm, into))
    if sends[me]:  # my own block does not travel
        dst.narrow(0, starts_out[me], recvs[me]).copy_(
            src.narrow(0, starts_in[me], sends[me])
        )
    wait_all(works)
    for frm, into in staged:
        dst.narrow(0, starts_out[frm], recvs[frm]).copy_(into)


# --8<-- [end:splits]


def random_splits(rows: int, p: int, g: torch.Generator) -> list[int]:
    """p counts summing to ``rows``, some of them zero on purpose (cut points drawn
    with repetition)."""
    cuts = sorted(torch.randint(0, rows + 1, (p - 1,), generator=g).tolist())
    edges = [0, *cuts, rows]
    return [b - a for a, b in zip(edges, edges[1:])]


def check_against_torch(rows_per_rank: int, width: int, dtype: torch.dtype) -> dict:
    """Every rank draws every rank's send sizes from one seed, so each knows what it
    receives; ours and ``dist.all_to_all_single`` move the same input."""
    p, me = dist.get_world_size(), dist.get_rank()
    g = torch.Generator().manual_seed(rows_per_rank * 31 + width)
    sends = [random_splits(rows_per_rank, p, g) for _ in range(p)]  # sends[i][j]
    recvs = [sends[i][me] for i in range(p)]
    shape = (rows_per_rank, width) if width else (rows_per_rank,)
    x = (torch.arange(rows_per_rank * max(width, 1)) + 1000 * me).reshape(shape)
    x = x.to(dtype).to(device())
    ours = torch.full((sum(recvs), *shape[1:]), -1, dtype=dtype, device=device())
    theirs = ours.clone()
    all_to_all_single(ours, x, recvs, sends[me])
    dist.all_to_all_single(theirs, x, recvs, sends[me])
    return {
        "equal": torch.equal(ours, theirs),
        "rows_sent": sends[me],
        "empty_blocks": sum(s == 0 for s in sends[me]),
    }


# --8<-- [start:main]
def main() -> dict:
    p = dist.get_world_size()
    cases = [(7, 3, torch.float64), (13, 0, torch.int64), (0, 2, torch.float32)]
    rows = []
    for n, width, dtype in cases:
        got = check_against_torch(n, width, dtype)
        ok = torch.tensor([int(got["equal"]), got["empty_blocks"]], device=device())
        dist.all_reduce(ok)  # every rank's verdict and its count of empty blocks
        law(int(ok[0]) == p, f"all_to_all_single differs from torch at {n} rows")
        rows.append(
            {"rows a rank": n, "row shape": f"({width},)" if width else "()",
             "dtype": str(dtype).removeprefix("torch."),
             "empty blocks (all ranks)": int(ok[1]), "equals torch": "✓"}
        )  # fmt: skip
        print0(
            f"{n:>2} rows a rank, {str(dtype)[6:]:>7}: rank 0 sends "
            f"{got['rows_sent']}, {int(ok[1])}/{p * p} blocks empty; = torch ✓"
        )
    return {"world_size": p, "tables": {"cases": rows}}


# --8<-- [end:main]

if __name__ == "__main__":
    raise SystemExit(main_entry(main, SPEC))
