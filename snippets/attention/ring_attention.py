"""Ring attention: one long sequence spread over p ranks (context parallelism).

Each rank holds a slice of the queries, keys and values (Liu, Zaharia & Abbeel, "Ring
Attention with Blockwise Transformers", 2023). The key/value slices travel round the ring,
rank r → r + 1, with ``isend``/``irecv`` started *before* the local block is computed, so the
transfer hides behind the compute. Each visiting block gives a partial output and its
log-sum-exp; the partials merge with the online-softmax rule (``merge_outputs``), so the
result is exact, and no rank ever holds more than two slices of K and V.

Causal masking would leave rank 0 idle (its queries see only its own keys) while the last
rank does p blocks of work. The zig-zag layout fixes that: cut the sequence into 2p chunks
and give rank r chunks r and 2p-1-r. Then, for a visiting block from rank s ≠ r, exactly
half of the work is unmasked on every rank: if s < r, all local queries attend to the first
half of the visiting keys; if s > r, the second half of the local queries attends to all of
them (Zhu, ring-flash-attention; Brandon et al., "Striped Attention", 2023, for a sibling).

Backward rings too (an autograd.Function): K and V travel again, and the gradients dK, dV
travel with them, each rank adding its share, until one last hop brings them home.

    python -m snippets.attention.ring_attention               # 4 local ranks, checked against SDPA
    torchrun --nproc-per-node 4 -m snippets.attention.ring_attention
"""

from __future__ import annotations

import argparse

import torch
import torch.distributed as dist
import torch.nn.functional as F

from snippets.attention.flash_attention import (
    check_inputs,
    flash_backward,
    flash_forward,
    head_dim,
)
from snippets.attention.online_softmax import merge_outputs
from snippets.core.cli import main_entry, positive_int
from snippets.core.runtime import Spec, device, print0

SPEC = Spec(
    summary="context parallelism: K/V blocks go round a ring, partials merge by online softmax",
    world_size=4,
    min_world_size=2,
)


# --8<-- [start:zigzag]
def zigzag_shard(
    x: torch.Tensor, rank: int, world_size: int, dim: int = 2
) -> torch.Tensor:
    """Rank r's part of a full sequence: chunks r and 2p-1-r of 2p equal chunks."""
    n = x.shape[dim]
    if n % (2 * world_size):
        raise ValueError(
            f"sequence length {n} must be divisible by 2 × world size = {2 * world_size} "
            f"for the zig-zag layout; pad it"
        )
    chunks = x.chunk(2 * world_size, dim=dim)
    return torch.cat([chunks[rank], chunks[2 * world_size - 1 - rank]], dim=dim)


def zigzag_unshard(shards: list[torch.Tensor], dim: int = 2) -> torch.Tensor:
    """Inverse of zigzag_shard: the p ranks' shards (in rank order) back to the full sequence."""
    p = len(shards)
    halves = [
        h for s in shards for h in s.chunk(2, dim=dim)
    ]  # [r0a, r0b, r1a, r1b, ...]
    order = [
        halves[2 * c] if c < p else halves[2 * (2 * p - 1 - c) + 1]
        for c in range(2 * p)
    ]
    return torch.cat(order, dim=dim)


# --8<-- [end:zigzag]


# --8<-- [start:ring]
def _start_pass(
    t: torch.Tensor, group: dist.ProcessGroup | None, tag: int
) -> tuple[list, torch.Tensor]:
    """Send t to the next rank and receive the previous rank's into a new buffer, without waiting."""
    r, p = dist.get_rank(group), dist.get_world_size(group)
    incoming = torch.empty_like(t)
    ops = [
        dist.P2POp(
            dist.isend, t.contiguous(), group=group, group_peer=(r + 1) % p, tag=tag
        ),
        dist.P2POp(dist.irecv, incoming, group=group, group_peer=(r - 1) % p, tag=tag),
    ]
    return dist.batch_isend_irecv(ops), incoming


def _finish_pass(pending: tuple[list, torch.Tensor]) -> torch.Tensor:
    works, incoming = pending
    for w in works:
        w.wait()
    return incoming


def _visible(
    step: int, rank: int, world_size: int, causal: bool, n: int
) -> tuple[slice, slice, bool]:
    """Which local query rows and which visiting key rows interact at this step, and whether
    the block needs the causal mask. Zig-zag: each half is one of the 2p chunks."""
    everything, first, second = slice(0, n), slice(0, n // 2), slice(n // 2, n)
    src = (rank - step) % world_size  # whose K/V is visiting
    if not causal:
        return everything, everything, False
    if (
        step == 0
    ):  # our own chunks: ordinary causal mask over the concatenated pair (r, 2p-1-r)
        return everything, everything, True
    if src < rank:  # both our chunks come after its first chunk and before its second
        return everything, first, False
    return (
        second,
        everything,
        False,
    )  # only our later chunk 2p-1-r sees its chunks, fully


# --8<-- [end:ring]


# --8<-- [start:forward]
def ring_forward(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    causal: bool,
    group: dist.ProcessGroup | None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Local O (B, H, n, d) and its log-sum-exp L (B, H, n), in fp32 (fp64 for fp64 inputs)."""
    rank, p = dist.get_rank(group), dist.get_world_size(group)
    n = q.shape[2]
    acc = torch.promote_types(
        q.dtype, torch.float32
    )  # partials merge in fp32; K, V travel as they are
    O = torch.zeros(q.shape, dtype=acc, device=q.device)
    L = torch.full(
        q.shape[:3], float("-inf"), dtype=acc, device=q.device
    )  # -inf: no key seen yet
    kv = torch.stack([k, v])  # (2, B, H, n, d): one message per hop
    for step in range(p):
        pending = (
            _start_pass(kv, group, tag=0) if step < p - 1 else None
        )  # next block, in flight
        rows, cols, mask = _visible(step, rank, p, causal, n)
        o, lse = flash_forward(
            q[:, :, rows], kv[0][:, :, cols], kv[1][:, :, cols], mask
        )
        O[:, :, rows], L[:, :, rows] = merge_outputs(
            O[:, :, rows], L[:, :, rows], o, lse
        )
        if pending is not None:
            kv = _finish_pass(
                pending
            )  # by now the transfer has (ideally) finished behind the compute
    return O, L


# --8<-- [end:forward]


# --8<-- [start:backward]
def ring_backward(
    dO: torch.Tensor,
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    O: torch.Tensor,
    L: torch.Tensor,
    causal: bool,
    group: dist.ProcessGroup | None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Each visiting block's gradients, from the *global* O and L (so P = exp(S - L) is the
    final probability). dK, dV ride along with their K, V and come home after p hops."""
    rank, p = dist.get_rank(group), dist.get_world_size(group)
    n = q.shape[2]
    acc = torch.promote_types(q.dtype, torch.float32)
    dq = torch.zeros(q.shape, dtype=acc, device=q.device)
    kv = torch.stack([k, v])  # (2, B, H, n, d)
    dkv = torch.zeros(
        kv.shape, dtype=acc, device=q.device
    )  # accumulator for the block now visiting
    grads_pending = None
    for step in range(p):
        pending = _start_pass(kv, group, tag=0) if step < p - 1 else None
        rows, cols, mask = _visible(step, rank, p, causal, n)
        dq_b, dk_b, dv_b = flash_backward(
            dO[:, :, rows],
            q[:, :, rows],
            kv[0][:, :, cols],
            kv[1][:, :, cols],
            O[:, :, rows],
            L[:, :, rows],
            mask,
        )
        dq[:, :, rows] += dq_b
        if (
            grads_pending is not None
        ):  # the previous rank's running dK, dV for this block
            dkv = _finish_pass(grads_pending)
        dkv[0][:, :, cols] += dk_b
        dkv[1][:, :, cols] += dv_b
        grads_pending = (
            _start_pass(dkv, group, tag=1) if p > 1 else None
        )  # on to the next rank
        if pending is not None:
            kv = _finish_pass(pending)
    if grads_pending is not None:
        dkv = _finish_pass(
            grads_pending
        )  # one last hop: our own block's dK, dV, from all p ranks
    return dq, dkv[0], dkv[1]


# --8<-- [end:backward]


class RingAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, causal, group):
        O, L = ring_forward(q, k, v, causal, group)
        O = O.to(q.dtype)
        ctx.save_for_backward(q, k, v, O, L)
        ctx.causal, ctx.group = causal, group
        return O

    @staticmethod
    def backward(ctx, dO):
        q, k, v, O, L = ctx.saved_tensors
        dq, dk, dv = ring_backward(dO, q, k, v, O, L, ctx.causal, ctx.group)
        return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype), None, None


def ring_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    causal: bool = False,
    group: dist.ProcessGroup | None = None,
) -> torch.Tensor:
    """Local sequence shards (B, H, n, d) in, local output shard out; differentiable.
    Every rank must pass the same shape. With causal=True the shards must be in zig-zag order
    (``zigzag_shard``), so n must be even."""
    check_inputs(q, k, v)
    if q.shape != k.shape:
        raise ValueError(
            f"ring attention needs q and k of one shape (self-attention), got "
            f"{tuple(q.shape)} and {tuple(k.shape)}"
        )
    if causal and q.shape[2] % 2:
        raise ValueError(
            f"causal ring attention needs an even local length (two zig-zag chunks), "
            f"got {q.shape[2]}; shard with zigzag_shard"
        )
    return RingAttention.apply(q, k, v, causal, group)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--chunk",
        type=positive_int,
        default=37,
        help="rows per zig-zag chunk; N = 2 × ranks × chunk (default 37)",
    )
    parser.add_argument(
        "--head-dim",
        type=head_dim,
        default=64,
        help="d, a multiple of 8 from 32 to 128 (default 64)",
    )


def main(chunk: int = 37, head_dim: int = 64) -> dict:
    rank, p = dist.get_rank(), dist.get_world_size()
    dev = device()
    gen = torch.Generator().manual_seed(0)  # the same full sequence on every rank
    N = (
        2 * p * chunk
    )  # default 37-row chunks: odd, so no power-of-two accident hides an index bug
    rows = []
    for causal in (False, True):
        q, k, v, dO = (
            torch.randn(2, 2, N, head_dim, generator=gen).to(dev) for _ in range(4)
        )
        mine = [
            zigzag_shard(t, rank, p).requires_grad_(t is not dO) for t in (q, k, v, dO)
        ]
        out = ring_attention(*mine[:3], causal=causal)
        grads = torch.autograd.grad(out, mine[:3], mine[3])

        def gather(t: torch.Tensor) -> torch.Tensor:
            parts = [torch.empty_like(t) for _ in range(p)]
            dist.all_gather(parts, t.detach().contiguous())
            return zigzag_unshard(parts)

        full = [gather(t) for t in (out, *grads)]
        # The oracle: SDPA on the whole gathered sequence, on one rank.
        q, k, v = (t.requires_grad_() for t in (q, k, v))
        ref = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        ref_grads = torch.autograd.grad(ref, (q, k, v), dO)
        errs = [(a - b).abs().max().item() for a, b in zip(full, (ref, *ref_grads))]
        assert max(errs) < 1e-4, f"causal={causal}: ring vs SDPA max errors {errs}"
        rows.append(
            {
                "causal": causal,
                "O": errs[0],
                "dQ": errs[1],
                "dK": errs[2],
                "dV": errs[3],
            }
        )

    # Why zig-zag: unmasked (query, key) pairs each rank owns under a causal mask.
    def pairs(positions: list[int] | range) -> int:
        return sum(i + 1 for i in positions)  # query i sees keys 0..i

    balance = [
        {
            "rank": r,
            "contiguous": pairs(range(r * 2 * chunk, (r + 1) * 2 * chunk)),
            "zig-zag": pairs(
                zigzag_shard(torch.arange(N)[None, None, :], r, p)[0, 0].tolist()
            ),
        }
        for r in range(p)
    ]
    print0(
        f"ring attention on {p} ranks, B=2 H=2 N={N} d={head_dim} (zig-zag chunks of {chunk}), "
        f"vs SDPA on the gathered sequence, max |error|:"
    )
    for r in rows:
        print0(
            f"  causal={r['causal']!s:<5}  O {r['O']:.1e}  dQ {r['dQ']:.1e}  dK {r['dK']:.1e}  dV {r['dV']:.1e}"
        )
    print0("causal work per rank, in unmasked (query, key) pairs:")
    print0(f"  {'rank':>4}  {'contiguous':>10}  {'zig-zag':>8}")
    for b in balance:
        print0(f"  {b['rank']:>4}  {b['contiguous']:>10}  {b['zig-zag']:>8}")
    return {"tables": {"errors": rows, "balance": balance}}


if __name__ == "__main__":
    raise SystemExit(main_entry(main, SPEC))
