"""Context parallelism inside the tiny GPT: every block's attention becomes ring
attention over a cp group, and each rank holds a zig-zag shard of every sequence.

Only attention mixes positions. Everything else in the GPT (embeddings, LayerNorms,
MLPs, head, cross-entropy) works token by token, so it runs unchanged on this rank's
s/cp tokens. Three things change:

* The shard (``shard_batch``): the sequence is cut into 2·cp chunks and rank r keeps
  chunks r and 2cp−1−r (``zigzag_shard``), so causal work is equal on every rank.
  Tokens, targets and positions are cut alike; ``embed(idx, positions)`` then adds
  each token's own position embedding, not 0..s/cp−1.
* Attention (``context_parallel_gpt``): ``block.attn.attention`` becomes
  ``RingCausalAttention``, the existing ``ring_attention`` over the group.
* The gradients: each rank backpropagates the mean loss over its own tokens. The
  ring's backward brings every rank's share of dK, dV home, so rank r's gradient is
  ∂L_r/∂θ through its queries and token-wise layers plus Σ_s ∂L_s/∂θ through its keys
  and values; summed over ranks that is ∂(Σ_s L_s)/∂θ. The shards are equal, so the
  global mean loss is (1/cp)·Σ_s L_s and its gradient is the SUM over cp ÷ cp:
  ``naive_allreduce_grads`` from ddp (SUM then divide; gloo's AVG has been wrong).

``RingLog`` counts what the ring sends at the op itself (``c10d::send``, seen by a
``TorchDispatchMode``), booked to the layer and phase the attention was in.
"""

from __future__ import annotations

from collections import defaultdict

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode

from snippets.attention.flash_attention import MAX_HEAD_DIM, MIN_HEAD_DIM
from snippets.attention.ring_attention import ring_attention
from snippets.attention.zigzag_layout import zigzag_shard
from snippets.core.runtime import UsageError
from snippets.models.tiny_gpt import GPT


# --8<-- [start:log]
class RingLog(TorchDispatchMode):
    """While active (``with log:``), every tensor this rank sends, booked to
    ``where`` = (layer tag, phase), which the attention sets as it runs."""

    def __init__(self) -> None:
        super().__init__()
        self.where = ("", "")
        self.sends: list[tuple[str, str, int, int]] = []  # tag, phase, elements, bytes

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func is torch.ops.c10d.send.default:  # args: (tensors, group, peer, tag)
            for t in args[0]:
                self.sends.append(
                    (*self.where, t.numel(), t.numel() * t.element_size())
                )
        return func(*args, **(kwargs or {}))

    def totals(self, tag: str, phase: str) -> dict[str, int]:
        """Sends, elements and bytes one layer sent in one phase."""
        out: dict[str, int] = defaultdict(int)
        for t, p, elements, nbytes in self.sends:
            if (t, p) == (tag, phase):
                out["sends"] += 1
                out["elements"] += elements
                out["bytes"] += nbytes
        return {k: out[k] for k in ("sends", "elements", "bytes")}


def ring_elements(cp: int, b: int, s: int, h: int, phase: str) -> int:
    """Elements one rank sends per layer: K and V are (b, s/cp, h) each, h = H·d/H.
    Forward: cp−1 hops of K, V. Backward: cp−1 hops of K, V again, and cp hops of
    dK, dV (the last brings each rank's own home); nothing at cp = 1."""
    kv = 2 * b * (s // cp) * h
    hops = cp - 1 if phase == "forward" else (cp - 1) + cp * (cp > 1)
    return hops * kv


# --8<-- [end:log]


# --8<-- [start:attention]
class RingCausalAttention:
    """A block's attention callable: causal ring attention over ``group``, on
    zig-zag shards (B, H, s/cp, d/H)."""

    def __init__(self, group=None, log: RingLog | None = None, tag: str = ""):
        self.group, self.log, self.tag = group, log, tag

    def __call__(self, q, k, v) -> torch.Tensor:
        if self.log is not None:
            self.log.where = (self.tag, "forward")
        out = ring_attention(q, k, v, causal=True, group=self.group)
        if self.log is not None and out.requires_grad:
            out.register_hook(self.backward_starts)  # runs just before the ring's
        return out

    def backward_starts(self, grad: torch.Tensor) -> None:
        self.log.where = (self.tag, "backward")


def context_parallel_gpt(model: GPT, group=None, log: RingLog | None = None) -> GPT:
    """The model itself, every block's attention now ring attention over ``group``
    (weights untouched: they are replicated over cp)."""
    cfg = model.config
    d = cfg.n_embd // cfg.n_head
    if not MIN_HEAD_DIM <= d <= MAX_HEAD_DIM or d % 8:
        raise UsageError(
            f"head dim n_embd/n_head = {d} is not one ring attention runs: use a "
            f"multiple of 8 from {MIN_HEAD_DIM} to {MAX_HEAD_DIM}"
        )
    for i, block in enumerate(model.blocks):
        block.attn.attention = RingCausalAttention(group, log, tag=f"blocks.{i}")
    return model


# --8<-- [end:attention]


# --8<-- [start:shard]
def shard_batch(
    idx: torch.Tensor, targets: torch.Tensor, cp_rank: int, cp: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """This rank's zig-zag shard of (B, s) tokens and targets, and the positions
    (s/cp,) of the tokens it keeps."""
    s = idx.shape[1]
    if s % (2 * cp):
        raise UsageError(
            f"sequence length {s} is not divisible by 2·cp = {2 * cp} (two zig-zag "
            "chunks per rank); choose a cp that divides s/2"
        )
    positions = torch.arange(s, device=idx.device)
    return tuple(
        zigzag_shard(t, cp_rank, cp, dim=-1) for t in (idx, targets, positions)
    )


def cp_loss(
    model: GPT, idx: torch.Tensor, targets: torch.Tensor, positions: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """The GPT's forward on a shard: logits (B, s/cp, V) and the mean cross-entropy
    over this rank's tokens."""
    x = model.embed(idx, positions)  # (B, s/cp, d), each token at its own position
    for block in model.blocks:
        x = block(x)
    logits = model.head(x)
    return logits, F.cross_entropy(logits.flatten(0, 1), targets.flatten())


def global_loss(local: torch.Tensor, group=None) -> torch.Tensor:
    """The mean over all s tokens: the mean of the cp ranks' equal-sized means."""
    total = local.detach().clone()
    dist.all_reduce(total, op=dist.ReduceOp.SUM, group=group)
    return total / dist.get_world_size(group)


# --8<-- [end:shard]
