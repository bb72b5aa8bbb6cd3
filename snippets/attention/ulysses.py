"""Ulysses sequence parallelism: trade the sequence for heads, attend, trade back.

Each of p ranks holds a contiguous slice of the sequence, n = N/p positions, for all
heads (Jacobs et al., "DeepSpeed Ulysses", 2023). Attention mixes positions but never
heads, so one all-to-all regroups the data: afterwards each rank holds *all* N
positions of H/p query heads and of the H_kv/p key/value heads they read (GQA: query
head h reads KV head h // (H/H_kv), and both head ranges start at rank·(1/p) of their
count, so they line up). Each rank then runs ordinary full attention (SDPA), and a
second all-to-all sends every output row home. Nothing is approximate and no
online-softmax merge is needed: each head's softmax happens on one rank, whole.

The price is the constraint: p must divide H_kv (and so H). A causal mask needs no
special layout: every rank holds whole sequences of its heads, so the masked work is
the same on every rank.

USP (``usp_attention``; Fang and Zhao, 2024) lifts that cap: the world is an r × u
grid, Ulysses runs inside each group of u ranks and ``ring_attention`` across the r
groups, on chunks of u·n positions; ``usp_positions`` says which positions each rank
holds so that the groups' chunks are the ones the ring expects, and ``usp_groups``
makes the groups.

Backward is the same two trades in reverse: an all-to-all's adjoint is the all-to-all
that undoes it (``SeqHeadsExchange``), and SDPA brings its own backward.

The traffic, per rank, counted at the calls (``Traffic``) and as formulas
(``bytes_sent``): Ulysses sends (p−1)/p of its q, k, v shards and, later, of the
output it computed, (B, H/p, N, d); the ring (``ring_attention``) sends its K and V
shards p−1 times.

    python -m snippets run ulysses      # 4 local ranks, checked against SDPA
    torchrun --nproc-per-node 4 -m snippets run ulysses
"""

from __future__ import annotations

import argparse
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode

from snippets.attention.flash_attention import head_dim
from snippets.attention.ring_attention import ring_attention
from snippets.attention.zigzag_layout import zigzag_shard
from snippets.core.claims import law
from snippets.core.cli import main_entry, positive_int
from snippets.core.errors import UsageError
from snippets.core.runtime import DEFAULT_TIMEOUT_S, Spec, device, print0

SPEC = Spec(
    summary="sequence parallel: all-to-all trades sequence for heads, SDPA, trade back",
    world_size=4,
)


def heads_problem(H: int, H_kv: int, p: int, name: str = "p") -> str:
    """Why H query heads and H_kv KV heads cannot split over p ranks, or ''. ``name``
    is the letter the message gives p (USP's Ulysses groups are u ranks)."""
    if H_kv < 1 or H % H_kv:
        return (
            f"GQA needs H_kv | H: H = {H} query heads are not a multiple of "
            f"H_kv = {H_kv}"
        )
    if H_kv % p:  # each rank gets H_kv/p KV heads and the H/p queries that read them
        return (
            f"Ulysses needs {name} | H_kv: {name} = {p} ranks must divide "
            f"H_kv = {H_kv} (and H = {H})"
        )
    return ""


# --8<-- [start:exchange]
def exchange(
    x: torch.Tensor, split: int, join: int, group: dist.ProcessGroup | None
) -> torch.Tensor:
    """Cut x into p pieces along ``split``, send piece j to rank j, and glue what
    arrives, in rank order, along ``join``: one ``all_to_all_single``."""
    p = dist.get_world_size(group)
    if p == 1:
        return x
    pieces = torch.stack(x.chunk(p, dim=split))  # (p, *piece): piece j → rank j
    arrived = torch.empty_like(pieces)
    dist.all_to_all_single(arrived, pieces, group=group)  # equal splits along dim 0
    return torch.cat(arrived.unbind(0), dim=join)  # piece from rank j, j-th along join


class SeqHeadsExchange(torch.autograd.Function):
    """The all-to-all as autograd sees it: a permutation of elements across ranks, so
    its adjoint is its inverse, the exchange with ``split`` and ``join`` swapped."""

    @staticmethod
    def forward(ctx, x, split: int, join: int, group):
        ctx.split, ctx.join, ctx.group = split, join, group
        return exchange(x, split, join, group)

    @staticmethod
    def backward(ctx, grad):
        back = exchange(grad.contiguous(), ctx.join, ctx.split, ctx.group)
        return back, None, None, None


# --8<-- [end:exchange]


# --8<-- [start:attention]
HEADS, SEQ = 1, 2  # the dims of (B, H, N, d)


def ulysses_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    group: dist.ProcessGroup | None = None,
    *,
    causal: bool = False,
) -> torch.Tensor:
    """This rank's contiguous sequence shard in, q (B, H, n, d) and k, v (B, H_kv, n,
    d) with n = N/p; its shard of attention over the whole sequence out, (B, H, n, d).
    Differentiable. Every rank passes the same shapes."""
    p = dist.get_world_size(group)
    if q.dim() != 4 or k.shape != v.shape or k.shape[::2] != q.shape[::2]:
        raise ValueError(
            "ulysses_attention needs q (B, H, n, d) and k, v (B, H_kv, n, d), got "
            f"{tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}"
        )
    if problem := heads_problem(q.shape[HEADS], k.shape[HEADS], p):
        raise UsageError(problem)
    # sequence → heads: (B, H, n, d) → (B, H/p, N, d); k, v → (B, H_kv/p, N, d)
    q, k, v = (SeqHeadsExchange.apply(t, HEADS, SEQ, group) for t in (q, k, v))
    group_size = q.shape[HEADS] // k.shape[HEADS]  # query heads per KV head (GQA)
    k, v = (t.repeat_interleave(group_size, dim=HEADS) for t in (k, v))
    out = F.scaled_dot_product_attention(q, k, v, is_causal=causal)  # whole rows
    # heads → sequence: (B, H/p, N, d) → (B, H, n, d)
    return SeqHeadsExchange.apply(out, SEQ, HEADS, group)


# --8<-- [end:attention]


# --8<-- [start:usp_positions]
def usp_positions(
    N: int,
    ring_rank: int,
    ring_size: int,
    ulysses_rank: int,
    ulysses_size: int,
    causal: bool,
) -> torch.Tensor:
    """The N/(r·u) positions, in order, that the rank at (ring_rank, ulysses_rank) of
    an r × u grid holds: its shard of x (B, H, N, d) is ``x[:, :, positions]``.

    The exchange glues a Ulysses group's u shards end to end in rank order, so the
    ring sees the group's shards, concatenated, as one chunk of u·n positions. Give
    ring rank i the chunk the ring expects (contiguous; zig-zag, chunks i and 2r−1−i
    of 2r, when causal) and cut it into u pieces, one for each member."""
    r, u = ring_size, ulysses_size
    if N % (r * u) or (causal and N % (2 * r)):
        raise ValueError(
            f"USP on an r × u = {r} × {u} grid needs r·u | N (and 2r | N when "
            f"causal, for the ring's zig-zag), got N = {N}; pad the sequence"
        )
    positions = torch.arange(N)
    if causal:
        chunk = zigzag_shard(positions, ring_rank, r, dim=0)  # the ring's balance
    else:
        chunk = positions.chunk(r)[ring_rank]
    return chunk.chunk(u)[ulysses_rank]  # (N/(r·u),)


# --8<-- [end:usp_positions]


# --8<-- [start:usp]
def usp_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    ulysses_group: dist.ProcessGroup,
    ring_group: dist.ProcessGroup,
    *,
    causal: bool = False,
) -> torch.Tensor:
    """USP (Fang and Zhao, 2024): Ulysses inside ``ulysses_group`` (u ranks), the ring
    across ``ring_group`` (r ranks). This rank's shard in, q (B, H, n, d) and k, v
    (B, H_kv, n, d), at the positions ``usp_positions`` gives its place in the grid;
    its output rows out, (B, H, n, d). Differentiable; u must divide H_kv.

    The exchange leaves each member of a Ulysses group H/u heads of the same u·n
    positions, the group's chunk, so the ring runs between groups on chunks u times
    longer. The project's ring takes q and k of one head count, so with GQA each
    rank repeats its H_kv/u KV heads to H/u after the exchange and the ring carries
    H/H_kv times the KV bytes it would need."""
    u = dist.get_world_size(ulysses_group)
    if q.dim() != 4 or k.shape != v.shape or k.shape[::2] != q.shape[::2]:
        raise ValueError(
            "usp_attention needs q (B, H, n, d) and k, v (B, H_kv, n, d), got "
            f"{tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}"
        )
    if problem := heads_problem(q.shape[HEADS], k.shape[HEADS], u, name="u"):
        raise UsageError(problem)
    # sequence → heads in the group: q (B, H/u, u·n, d), k, v (B, H_kv/u, u·n, d)
    q, k, v = (SeqHeadsExchange.apply(t, HEADS, SEQ, ulysses_group) for t in (q, k, v))
    group_size = q.shape[HEADS] // k.shape[HEADS]  # query heads per KV head (GQA)
    k, v = (t.repeat_interleave(group_size, dim=HEADS) for t in (k, v))
    out = ring_attention(q, k, v, causal=causal, group=ring_group)  # (B, H/u, u·n, d)
    # heads → sequence: (B, H/u, u·n, d) → (B, H, n, d)
    return SeqHeadsExchange.apply(out, SEQ, HEADS, ulysses_group)


# --8<-- [end:usp]


# --8<-- [start:usp_groups]
def usp_groups(
    ulysses_size: int, timeout_s: float = DEFAULT_TIMEOUT_S
) -> tuple[dist.ProcessGroup, dist.ProcessGroup]:
    """This rank's (Ulysses group, ring group) in a grid of the p = r·u ranks of the
    world: rank g sits at ring rank g // u, Ulysses rank g % u. Consecutive ranks
    share a Ulysses group, and torchrun numbers a node's ranks consecutively, so with
    u up to a node's GPUs the all-to-alls stay inside the node and only the ring's
    hops cross between nodes."""
    p, rank, u = dist.get_world_size(), dist.get_rank(), ulysses_size
    if u < 1 or p % u:
        raise UsageError(
            f"USP needs u | p: a Ulysses size of u = {u} must divide the p = {p} ranks"
        )
    grid = [list(range(i * u, (i + 1) * u)) for i in range(p // u)]  # [ring][ulysses]
    timeout = timedelta(seconds=timeout_s)
    # every rank makes every group, in one order: making a group is a collective
    ulysses = [dist.new_group(row, timeout=timeout) for row in grid]
    ring = [dist.new_group(list(column), timeout=timeout) for column in zip(*grid)]
    return ulysses[rank // u], ring[rank % u]


# --8<-- [end:usp_groups]


# --8<-- [start:bytes]
def bytes_sent(
    method: str, B: int, H: int, H_kv: int, N: int, d: int, p: int, size: int
) -> dict[str, int]:
    """Bytes one rank sends, forward and backward, for elements of ``size`` bytes.

    Ulysses: each all-to-all keeps 1/p of its input at home. Forward sends q (B, H,
    n, d), k and v (B, H_kv, n, d), then the output, (B, H, n, d) again; backward
    sends dO, dQ, dK, dV, the same sizes: (p−1)/p · B·n·d·(2H + 2H_kv) each way.
    Ring: K and V travel as one (2, B, H_kv, n, d) message, p−1 hops forward and p−1
    again in backward, and dK, dV travel p hops (the last brings them home) in the
    ring's fp32 accumulator (fp64 for fp64)."""
    n = N // p
    if method == "ulysses":  # p | H_kv | H: every count below is whole
        moved = (p - 1) * B * n * d * 2 * (H // p + H_kv // p) * size
        return {"forward": moved, "backward": moved}
    if method == "ring":
        kv = 2 * B * H_kv * n * d
        grads = p * kv * max(size, 4) if p > 1 else 0
        return {"forward": (p - 1) * kv * size, "backward": (p - 1) * kv * size + grads}
    raise ValueError(f"method must be 'ulysses' or 'ring', got {method!r}")


class Traffic(TorchDispatchMode):
    """While active (``with Traffic(group) as t:``), the bytes this rank hands to
    ``send`` and to ``all_to_all_single`` that leave it: the whole of a send, all of
    an all-to-all's input but this rank's own block."""

    def __init__(self, group: dist.ProcessGroup | None = None) -> None:
        super().__init__()
        self.rank, self.p = dist.get_rank(group), dist.get_world_size(group)
        self.bytes = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func is torch.ops.c10d.send.default:  # (tensors, group, peer, tag)
            self.bytes += sum(t.nbytes for t in args[0])
        elif func is torch.ops.c10d.alltoall_base_.default:
            # (output, input, group, output_split_sizes, input_split_sizes, …)
            rows = args[1].shape[0]
            splits = list(args[4]) or [rows // self.p] * self.p  # [] = equal blocks
            self.bytes += (rows - splits[self.rank]) * args[1].nbytes // rows
        return func(*args, **(kwargs or {}))


# --8<-- [end:bytes]


def counted(
    attend, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, dO: torch.Tensor
) -> tuple[list[torch.Tensor], dict[str, int]]:
    """``attend(q, k, v)`` forward and backward; (out, dQ, dK, dV) and the bytes this
    rank sent in each pass."""
    mine = [t.detach().requires_grad_() for t in (q, k, v)]
    with Traffic() as forward:
        out = attend(*mine)
    with Traffic() as backward:
        grads = torch.autograd.grad(out, mine, dO)
    return [out.detach(), *grads], {
        "forward": forward.bytes,
        "backward": backward.bytes,
    }


def check_options(options: dict, world_size: int) -> None:
    """Refuse heads that do not split over the ranks, before any rank starts."""
    if problem := heads_problem(options["heads"], options["kv_heads"], world_size):
        raise UsageError(problem)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--rows",
        type=positive_int,
        default=37,
        help="positions per rank, n; N = ranks × n (default 37)",
    )
    parser.add_argument(
        "--heads", type=positive_int, default=16, help="query heads H (default 16)"
    )
    parser.add_argument(
        "--kv-heads",
        type=positive_int,
        default=4,
        help="KV heads of the GQA case, H_kv: divides H, and the ranks divide it "
        "(default 4)",
    )
    parser.add_argument(
        "--head-dim",
        type=head_dim,
        default=64,
        help="d, a multiple of 8 from 32 to 128 (the ring's kernel; default 64)",
    )


def main(
    rows: int = 37, heads: int = 16, kv_heads: int = 4, head_dim: int = 64
) -> dict:
    """Ulysses on this rank's shard vs SDPA on the whole sequence, MHA (H_kv = H) and
    GQA, causal and not, and USP on a (p/2) × 2 grid for GQA where p is even and at
    least 4; and the bytes Ulysses and the ring send, counted and by formula."""
    rank, p = dist.get_rank(), dist.get_world_size()
    B, H, n, d, N = 2, heads, rows, head_dim, p * rows
    mine = slice(rank * n, (rank + 1) * n)  # contiguous shards
    gen = torch.Generator().manual_seed(0)  # the same full sequence on every rank
    grid = usp_groups(2) if p >= 4 and p % 2 == 0 else None  # Ulysses in pairs
    errors, usp_errors, traffic = [], [], []

    def worst(got, want, at, said) -> dict:
        """The worst rank's |error| in O, dQ, dK, dV, against the oracle's rows at."""
        errs = torch.stack([(a - b[:, :, at]).abs().max() for a, b in zip(got, want)])
        dist.all_reduce(errs, op=dist.ReduceOp.MAX)
        law(errs.max().item() < 1e-4, f"{said}: vs SDPA {errs.tolist()}")
        return dict(zip(("O", "dQ", "dK", "dV"), errs.tolist()))

    for name, H_kv in (("MHA", H), ("GQA", kv_heads)):
        shapes = [(B, H, N, d), (B, H_kv, N, d), (B, H_kv, N, d), (B, H, N, d)]
        q, k, v, dO = (torch.randn(s, generator=gen).to(device()) for s in shapes)
        for causal in (False, True):

            def ulysses(q, k, v):
                return ulysses_attention(q, k, v, causal=causal)

            got, sent = counted(ulysses, *(t[:, :, mine] for t in (q, k, v, dO)))
            # The oracle: SDPA on the whole sequence on one rank, GQA by its own flag.
            whole = [t.detach().requires_grad_() for t in (q, k, v)]
            ref = F.scaled_dot_product_attention(
                *whole, is_causal=causal, enable_gqa=H_kv < H
            )
            want = [ref, *torch.autograd.grad(ref, whole, dO)]
            row = {"heads": f"{name} {H}/{H_kv}", "causal": causal}
            said = f"{name} causal={causal}"
            errors.append(row | worst(got, want, mine, said))
            if grid and H_kv < H:  # USP against the same oracle, at its positions
                u_group, r_group = grid
                at = usp_positions(
                    N, dist.get_rank(r_group), p // 2, dist.get_rank(u_group), 2, causal
                ).to(device())
                shard = [t[:, :, at].requires_grad_() for t in (q, k, v)]
                out = usp_attention(*shard, u_group, r_group, causal=causal)
                got = [out, *torch.autograd.grad(out, shard, dO[:, :, at])]
                usp = worst(got, want, at, f"USP {said}")
                usp_errors.append({"r × u": f"{p // 2} × 2"} | row | usp)
        counts = {"ulysses": sent}  # from the causal run; the mask moves nothing
        if H_kv == H:  # the project's ring takes q and k of one shape (MHA)
            shards = (t[:, :, mine] for t in (q, k, v, dO))
            counts["ring"] = counted(ring_attention, *shards)[1]
        for method in ("ulysses", "ring"):
            want = bytes_sent(method, B, H, H_kv, N, d, p, q.element_size())
            if method in counts:
                said = f"{method} {name}: sent {counts[method]}, formula {want}"
                law(counts[method] == want, said)
            traffic.append(
                {"heads": f"{name} {H}/{H_kv}", "method": method}
                | want
                | {"counted at the calls": "= formula ✓" if method in counts else "—"}
            )
    print0(f"Ulysses on {p} ranks, B={B} N={N} (n={n} a rank) d={d}, fp32")
    print0("vs SDPA on the gathered sequence, max |error|:")
    labelled = [("Ulysses", r) for r in errors]
    labelled += [(f"USP {r['r × u']}", r) for r in usp_errors]
    for how, r in labelled:
        print0(
            f"  {how:<9} {r['heads']:<9} causal={r['causal']!s:<5}  "
            f"O {r['O']:.1e}  dQ {r['dQ']:.1e}  dK {r['dK']:.1e}  dV {r['dV']:.1e}"
        )
    print0("bytes one rank sends (forward, backward):")
    for r in traffic:
        print0(
            f"  {r['heads']:<9} {r['method']:<8} {r['forward']:>10,} "
            f"{r['backward']:>10,}  counted: {r['counted at the calls']}"
        )
    usp_table = {"usp": usp_errors} if grid else {}  # the note shows a 2 × 2 grid
    return {"tables": {"errors": errors, "bytes": traffic} | usp_table}


if __name__ == "__main__":
    raise SystemExit(main_entry(main, SPEC))
