"""Ring attention: one long sequence spread over p ranks (context parallelism).

Each rank holds a slice of the queries, keys and values (Liu, Zaharia & Abbeel, "Ring
Attention with Blockwise Transformers", 2023). The key/value slices travel round the
ring, rank r → r + 1, with ``isend``/``irecv`` started *before* the local block is
computed, so the transfer hides behind the compute. Each visiting block goes through
the tiled FlashAttention forward (``flash_forward``), which gives a partial output and
its log-sum-exp; the partials merge with the online-softmax rule (``merge_outputs``),
so the result is exact, and no rank ever holds more than two slices of K and V.

Causal masking uses the zig-zag layout (``zigzag_layout``): rank r holds chunks r and
2p-1-r of 2p, so every rank does the same unmasked work at every step.

Backward rings too (an autograd.Function): K and V travel again, and the gradients
dK, dV travel with them, each rank adding its share, until one last hop brings them
home.

    python -m snippets run ring_attention      # 4 local ranks, checked against SDPA
    torchrun --nproc-per-node 4 -m snippets run ring_attention
"""

from __future__ import annotations

import argparse

import torch
import torch.distributed as dist
import torch.nn.functional as F

from snippets.attention.flash_algorithms import flash_backward, flash_forward
from snippets.attention.flash_attention import check_inputs, head_dim
from snippets.attention.online_softmax import merge_outputs
from snippets.attention.ring_pass import finish_pass, start_pass
from snippets.attention.zigzag_layout import (
    causal_pairs,
    visible_block,
    zigzag_shard,
    zigzag_unshard,
)
from snippets.core.claims import law
from snippets.core.cli import main_entry, positive_int
from snippets.core.runtime import Spec, device, print0

SPEC = Spec(
    summary="context parallel: K/V go round a ring, partials merge by online softmax",
    world_size=4,
    min_world_size=2,
)


# --8<-- [start:forward]
def ring_forward(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    causal: bool,
    group: dist.ProcessGroup | None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Local O (B, H, n, d) and its log-sum-exp L (B, H, n), in fp32 (fp64 for fp64
    inputs)."""
    rank, p = dist.get_rank(group), dist.get_world_size(group)
    n = q.shape[2]
    acc = torch.promote_types(q.dtype, torch.float32)  # partials merge in fp32
    O = torch.zeros(q.shape, dtype=acc, device=q.device)
    # -inf: no key seen yet, the identity of the merge
    L = torch.full(q.shape[:3], float("-inf"), dtype=acc, device=q.device)
    kv = torch.stack([k, v])  # (2, B, H, n, d): one message per hop, as K, V are
    for step in range(p):
        # the next block is in flight while this one computes
        pending = start_pass(kv, group, tag=0) if step < p - 1 else None
        rows, cols, mask = visible_block(step, rank, p, causal, n)
        o, lse = flash_forward(
            q[:, :, rows], kv[0][:, :, cols], kv[1][:, :, cols], mask
        )
        O[:, :, rows], L[:, :, rows] = merge_outputs(
            O[:, :, rows], L[:, :, rows], o, lse
        )
        if pending is not None:
            kv = finish_pass(pending)  # ideally already arrived, behind the compute
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
    """Each visiting block's gradients, from the *global* O and L (so P = exp(S - L) is
    the final probability). dK, dV ride along with their K, V and come home after p
    hops."""
    rank, p = dist.get_rank(group), dist.get_world_size(group)
    n = q.shape[2]
    acc = torch.promote_types(q.dtype, torch.float32)
    dq = torch.zeros(q.shape, dtype=acc, device=q.device)
    kv = torch.stack([k, v])  # (2, B, H, n, d)
    # the running dK, dV of the block now visiting
    dkv = torch.zeros(kv.shape, dtype=acc, device=q.device)  # (2, B, H, n, d)
    grads_pending = None
    for step in range(p):
        pending = start_pass(kv, group, tag=0) if step < p - 1 else None
        rows, cols, mask = visible_block(step, rank, p, causal, n)
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
        if grads_pending is not None:  # the previous rank's dK, dV for this block
            dkv = finish_pass(grads_pending)
        dkv[0][:, :, cols] += dk_b
        dkv[1][:, :, cols] += dv_b
        # on to the next rank, on their own tag so gloo never pairs them with K, V
        grads_pending = start_pass(dkv, group, tag=1) if p > 1 else None
        if pending is not None:
            kv = finish_pass(pending)
    if grads_pending is not None:
        # one last hop: our own block's dK, dV, with every rank's share in it
        dkv = finish_pass(grads_pending)
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
    Every rank must pass the same shape. With causal=True the shards must be in
    zig-zag order (``zigzag_shard``), so n must be even."""
    check_inputs(q, k, v)
    if q.shape != k.shape:
        raise ValueError(
            "ring attention needs q and k of one shape (self-attention), got "
            f"{tuple(q.shape)} and {tuple(k.shape)}"
        )
    if causal and q.shape[2] % 2:
        raise ValueError(
            "causal ring attention needs an even local length (two zig-zag "
            f"chunks), got {q.shape[2]}; shard with zigzag_shard"
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
    # default 37-row chunks: odd, so no power-of-two accident hides an index bug
    N = 2 * p * chunk
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
        law(max(errs) < 1e-4, f"causal={causal}: ring vs SDPA max errors {errs}")
        rows.append({"causal": causal} | dict(zip(("O", "dQ", "dK", "dV"), errs)))

    # Why zig-zag: unmasked (query, key) pairs each rank owns under a causal mask.
    positions = torch.arange(N)[None, None, :]
    balance = [
        {
            "rank": r,
            "contiguous": causal_pairs(range(r * 2 * chunk, (r + 1) * 2 * chunk)),
            "zig-zag": causal_pairs(zigzag_shard(positions, r, p)[0, 0].tolist()),
        }
        for r in range(p)
    ]
    print0(f"ring attention on {p} ranks, B=2 H=2 N={N} d={head_dim}")
    print0(
        f"(zig-zag chunks of {chunk}), vs SDPA on the gathered sequence, max |error|:"
    )
    for r in rows:
        print0(
            f"  causal={r['causal']!s:<5}  O {r['O']:.1e}  dQ {r['dQ']:.1e}  "
            f"dK {r['dK']:.1e}  dV {r['dV']:.1e}"
        )
    print0("causal work per rank, in unmasked (query, key) pairs:")
    print0(f"  {'rank':>4}  {'contiguous':>10}  {'zig-zag':>8}")
    for b in balance:
        print0(f"  {b['rank']:>4}  {b['contiguous']:>10}  {b['zig-zag']:>8}")
    return {"tables": {"errors": rows, "balance": balance}}


if __name__ == "__main__":
    raise SystemExit(main_entry(main, SPEC))
