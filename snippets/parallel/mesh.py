"""One rank grid for four parallelisms: ``Mesh(dp, pp, cp, tp)``.

The world's ranks are laid out as a grid of shape (dp, pp, cp, tp), the last axis
fastest: rank = ((dp_rank · pp + pp_rank) · cp + cp_rank) · tp + tp_rank. Ranks
that differ only in their tp coordinate are neighbours (0, 1, …), so the
parallelism that talks most, tensor parallel, stays inside one node; then context
parallel, then the pipeline, and data parallel outermost. This is picotron's
``arange(world).view(dp, pp, cp, tp)``; Megatron-LM's default order, tp-cp-ep-dp-pp,
keeps tp and cp innermost too but puts the pipeline outside data parallel.

A group along an axis is the ranks that agree on every other coordinate. Every rank
calls ``dist.new_group`` for every group of every axis, in one fixed order (the
backends require it), and keeps the ones it belongs to. ``dp_cp_group`` (data and
context parallel together) is where replicated gradients are averaged when both are
on. The mesh is an object handed to whoever needs it, never a module global;
``group_ranks`` is the same arithmetic without a process group, for tests and plans.

Expert parallelism is folded over data parallel, as in Megatron-LM and DeepSpeed-MoE,
not a fifth axis: ``ep`` divides ``dp``, and each block of ep consecutive dp ranks
(same pp, cp, tp) is an ``ep_group`` that splits the experts and trades tokens by
all-to-all, ``ep_rank = dp_rank mod ep``. The ranks that hold the same experts, the
dp/ep replicas times cp, are the ``expert_dp_group``, where expert gradients are
summed. Folded, a dense run and a mixture-of-experts run use the same ranks for the
same attention, embeddings and batch rows; only the experts are cut further, and the
tokens an expert sees stay the ones data parallel already spread over those ranks.

    python -m snippets run mesh --dp 2 --pp 2 --tp 2        # the grid, one process
    python -m snippets run mesh -n 4 --dp 2 --tp 2          # built and checked
"""

from __future__ import annotations

import argparse
import math
import textwrap
from typing import NamedTuple

import torch
import torch.distributed as dist

from snippets.core.claims import law
from snippets.core.cli import main_entry, positive_int
from snippets.core.runtime import Spec, UsageError, print0

SPEC = Spec(summary="one rank grid (dp, pp, cp, tp), its groups checked by all-reduce")
AXES = ("dp", "pp", "cp", "tp")  # slowest to fastest
EXPERT_AXES = ("ep", "expert_dp")  # folded over dp (and cp): not axes of the grid


def check_ep(dp: int, ep: int) -> None:
    if ep < 1 or dp % ep:
        raise UsageError(
            f"--ep {ep} does not divide dp = {dp}: expert parallel folds over data "
            "parallel; choose a divisor of dp"
        )


# --8<-- [start:grid]
class Coordinates(NamedTuple):
    dp: int
    pp: int
    cp: int
    tp: int


def coordinates(rank: int, shape: tuple[int, int, int, int]) -> Coordinates:
    """A global rank's place in the (dp, pp, cp, tp) grid: its digits, tp fastest."""
    digits = []
    for size in reversed(shape):  # tp, cp, pp, dp
        rank, digit = divmod(rank, size)
        digits.append(digit)
    return Coordinates(*reversed(digits))


def group_ranks(
    axis: str, shape: tuple[int, int, int, int], ep: int = 1
) -> list[list[int]]:
    """Every group along ``axis`` ("dp", "pp", "cp", "tp", "dp_cp", "ep" or
    "expert_dp"), each a list of global ranks in group-rank order; together they
    partition the world. ``ep`` divides dp: dp_rank = (dp_rank // ep) · ep + ep_rank."""
    grid = torch.arange(math.prod(shape)).view(shape)  # grid[dp, pp, cp, tp] = rank
    if axis == "dp_cp":  # dp and cp together: the (dp, cp) plane at each (pp, tp)
        return grid.permute(1, 3, 0, 2).reshape(-1, shape[0] * shape[2]).tolist()
    folded = grid.view(shape[0] // ep, ep, *shape[1:])  # [dp/ep, ep, pp, cp, tp]
    if axis == "ep":  # ep consecutive dp ranks at one (pp, cp, tp)
        return folded.permute(0, 2, 3, 4, 1).reshape(-1, ep).tolist()
    if axis == "expert_dp":  # the (dp/ep, cp) plane at one (ep, pp, tp)
        width = shape[0] // ep * shape[2]
        return folded.permute(1, 2, 4, 0, 3).reshape(-1, width).tolist()
    i = AXES.index(axis)
    return grid.movedim(i, -1).reshape(-1, shape[i]).tolist()


# --8<-- [end:grid]


# --8<-- [start:mesh]
class Mesh:
    """This rank's groups and coordinates in a (dp, pp, cp, tp) grid of the world,
    expert parallel (``ep``) folded over dp."""

    def __init__(self, dp: int = 1, pp: int = 1, cp: int = 1, tp: int = 1, ep=1):
        self.shape = (dp, pp, cp, tp)
        self.world_size, self.rank = dist.get_world_size(), dist.get_rank()
        if min(self.shape) < 1 or math.prod(self.shape) != self.world_size:
            raise UsageError(
                f"dp·pp·cp·tp = {dp}·{pp}·{cp}·{tp} = {math.prod(self.shape)} but "
                f"the world has {self.world_size} ranks; make the product equal it"
            )
        check_ep(dp, ep)
        self.dp, self.pp, self.cp, self.tp = self.shape  # sizes
        here = coordinates(self.rank, self.shape)
        self.dp_rank, self.pp_rank, self.cp_rank, self.tp_rank = here
        self.ep, self.ep_rank = ep, self.dp_rank % ep
        self.ranks: dict[str, list[int]] = {}  # axis → the global ranks of my group
        groups = {}
        for axis in (*AXES, "dp_cp", *EXPERT_AXES):  # the same order on every rank
            for ranks in group_ranks(axis, self.shape, ep):
                group = dist.new_group(ranks)  # every rank calls it for every group
                if self.rank in ranks:
                    self.ranks[axis], groups[axis] = ranks, group
        self.dp_group, self.pp_group = groups["dp"], groups["pp"]
        self.cp_group, self.tp_group = groups["cp"], groups["tp"]
        self.dp_cp_group = groups["dp_cp"]
        self.ep_group, self.expert_dp_group = groups["ep"], groups["expert_dp"]
        self.pp_is_first_stage = self.pp_rank == 0
        self.pp_is_last_stage = self.pp_rank == pp - 1
        # global ranks of the neighbouring stages; they wrap round, so an interleaved
        # schedule's last stage can send its chunk on to the first
        self.pp_next_rank = self.ranks["pp"][(self.pp_rank + 1) % pp]
        self.pp_prev_rank = self.ranks["pp"][(self.pp_rank - 1) % pp]

    def coordinates(self, rank: int | None = None) -> Coordinates:
        """(dp, pp, cp, tp) of a global rank, this one by default."""
        return coordinates(self.rank if rank is None else rank, self.shape)

    def to_dict(self) -> dict:
        """The sizes, this rank and its coordinates (``tp_rank`` …), for JSON; ep
        and ep_rank when expert parallel is on."""
        here = {f"{a}_rank": c for a, c in zip(AXES, self.coordinates())}
        experts = {"ep": self.ep, "ep_rank": self.ep_rank} if self.ep > 1 else {}
        return {**dict(zip(AXES, self.shape)), "rank": self.rank, **here, **experts}

    def describe(self) -> str:
        return describe(self.shape, ep=self.ep)


# --8<-- [end:mesh]


# --8<-- [start:describe]
def cell(ranks: list[list[int]]) -> str:
    """One (dp, pp) cell: its cp blocks of tp ranks, [0 1][2 3] for cp = 2, tp = 2.
    A wide one is its range: cp and tp are the inner axes, so the ranks are
    consecutive."""
    text = "".join(f"[{' '.join(map(str, t))}]" for t in ranks)
    return text if len(text) <= 24 else f"[{ranks[0][0]}..{ranks[-1][-1]}]"


def describe(shape: tuple[int, int, int, int], columns: int = 88, ep: int = 1) -> str:
    """The grid as text, a row per dp replica and a column per pipeline stage (in
    blocks of stages that fit the width), then every axis's groups (the expert ones
    when ep > 1)."""
    dp, pp, cp, tp = shape
    grid = torch.arange(math.prod(shape)).view(shape).tolist()
    cells = [[cell(stage) for stage in replica] for replica in grid]
    width = max(len(c) for row in cells for c in row) + 2
    per_block = max(1, (columns - 6) // width)  # stages side by side
    lines = [
        f"mesh dp={dp} pp={pp} cp={cp} tp={tp}: {math.prod(shape)} ranks, "
        "tp fastest, then cp, pp, dp" + (f"; ep={ep} folded over dp" if ep > 1 else "")
    ]
    for first in range(0, pp, per_block):
        stages = range(first, min(pp, first + per_block))
        head = "".join(f"{f'pp {s}':<{width}}" for s in stages)
        lines.append((" " * 6 + head).rstrip())
        for d, row in enumerate(cells):
            text = "".join(f"{row[s]:<{width}}" for s in stages)
            lines.append((f"{f'dp {d}':<6}" + text).rstrip())
    width = 18 if ep > 1 else 14  # "expert_dp groups" is longer
    for axis in (*AXES, "dp_cp", *(EXPERT_AXES if ep > 1 else ())):
        groups = " ".join(
            "{" + ",".join(map(str, g)) + "}" for g in group_ranks(axis, shape, ep)
        )
        indent = f"{axis + ' groups':<{width}}"
        lines += textwrap.wrap(
            groups, columns, initial_indent=indent, subsequent_indent=" " * width
        )
    return "\n".join(lines)


# --8<-- [end:describe]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    for axis, default in zip(AXES, (2, 2, 1, 2)):
        parser.add_argument(
            f"--{axis}",
            type=positive_int,
            default=default,
            help=f"{axis} size (default {default})",
        )
    parser.add_argument(
        "--ep", type=positive_int, default=1,
        help="expert parallel size, folded over dp: divides it (default 1)",
    )  # fmt: skip


def check_arithmetic(shape: tuple[int, int, int, int]) -> None:
    """group_ranks against coordinates(): along each axis the groups cover the world
    once, and a group's members agree on every other coordinate and count 0, 1, …
    along the axis."""
    world = math.prod(shape)
    for axis in (*AXES, "dp_cp"):
        groups = group_ranks(axis, shape)
        law(sorted(r for g in groups for r in g) == list(range(world)), axis)
        kept = [a for a in AXES if a not in axis.split("_")]  # coordinates held fixed
        for g in groups:
            where = [coordinates(r, shape) for r in g]
            law(len({tuple(getattr(c, a) for a in kept) for c in where}) == 1, g)
            inner = [tuple(getattr(c, a) for a in AXES if a not in kept) for c in where]
            law(inner == sorted(inner) and len(set(inner)) == len(g), g)


def check_expert_arithmetic(shape: tuple[int, int, int, int], ep: int) -> None:
    """The folded groups against coordinates(): an ep group is dp ranks
    (dp_rank // ep)·ep + 0, 1, …, ep−1 at one (pp, cp, tp); an expert_dp group is
    every (dp_rank // ep, cp_rank) at one (dp_rank mod ep, pp, tp), dp slowest."""
    world = math.prod(shape)
    for axis in EXPERT_AXES:
        groups = group_ranks(axis, shape, ep)
        law(sorted(r for g in groups for r in g) == list(range(world)), axis)
        for g in groups:
            c = [coordinates(r, shape) for r in g]
            if axis == "ep":
                fixed = {(x.dp // ep, x.pp, x.cp, x.tp) for x in c}
                inner = [x.dp % ep for x in c]
            else:
                fixed = {(x.dp % ep, x.pp, x.tp) for x in c}
                inner = [(x.dp // ep, x.cp) for x in c]
            law(len(fixed) == 1 and inner == sorted(set(inner)), (axis, g))
            law(len(g) == (ep if axis == "ep" else shape[0] // ep * shape[2]), g)


def check_groups(mesh: Mesh) -> dict[str, list[int]]:
    """Each group all-reduces this rank's id and all-gathers it: the sum and the
    members must be the arithmetic's. Returns the members each group reported."""
    seen = {}
    for axis in (*AXES, "dp_cp", *(EXPERT_AXES if mesh.ep > 1 else ())):
        group, ranks = getattr(mesh, f"{axis}_group"), mesh.ranks[axis]
        total = torch.tensor([mesh.rank])
        dist.all_reduce(total, group=group)
        members = [torch.zeros(1, dtype=torch.long) for _ in ranks]
        dist.all_gather(members, torch.tensor([mesh.rank]), group=group)
        seen[axis] = [m.item() for m in members]
        law(total.item() == sum(ranks) and seen[axis] == ranks, (axis, seen, ranks))
    return seen


def main(dp: int = 2, pp: int = 2, cp: int = 1, tp: int = 2, ep: int = 1) -> dict:
    shape = (dp, pp, cp, tp)
    check_ep(dp, ep)
    check_arithmetic(shape)
    check_expert_arithmetic(shape, ep)
    if not dist.is_initialized():  # one process: the plan, checked as arithmetic
        print0(describe(shape, ep=ep))
        print0("groups = ranks agreeing on every other coordinate ✓ (arithmetic only;")
        print0(f"-n {math.prod(shape)} builds them)")
        return {"mesh": dict(zip(AXES, shape)), "built": False}
    mesh = Mesh(*shape, ep=ep)
    seen = check_groups(mesh)
    print0(mesh.describe())
    print0(f"built on {mesh.world_size} ranks: every group's all-reduce and all-gather")
    print0("of the rank ids equal the arithmetic ✓")
    return {"mesh": mesh.to_dict(), "built": True, "groups": seen}


if __name__ == "__main__":
    raise SystemExit(main_entry(main, SPEC))
