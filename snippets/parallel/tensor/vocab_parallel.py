"""The vocabulary cut over the tensor-parallel ranks (Megatron-LM, Shoeybi et al. 2019,
section 3): the (V, d) embedding and the logits (B, N, V) are the largest tensors of a
small-width model, so rank r keeps token ids [r·V/t, (r+1)·V/t) only.

* ``VocabParallelEmbedding.from_dense(embedding, group)``: each rank looks up the ids
  it owns and writes zeros for the others; ``g`` (an all-reduce) sums the t partial
  lookups into the dense one.
* ``vocab_parallel_cross_entropy(logits, targets, group)``: the logits stay cut. The
  softmax needs three numbers per token from all ranks: the maximum (for stability),
  the sum of exponentials, and the target's logit, which lives on one rank. Each is a
  per-token all-reduce of B·N values, never of B·N·V. The sums go through ``g``, whose
  backward is the identity: every rank computes the same loss from the same sums, so
  ∂L/∂(its partial sum) is ∂L/∂(the sum), and autograd gives softmax − one-hot on the
  rank's own block.

A vocabulary that t does not divide is refused with one line (pad it first); Megatron
pads it (Megatron-LM#1754 is a run that diverged without the padding).
"""

from __future__ import annotations

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

from snippets.parallel.tensor.tensor_parallel import CommLog, g, tp_block_size


# --8<-- [start:embedding]
class VocabParallelEmbedding(nn.Module):
    """Rows [lo, hi) of a (V, d) embedding; ids outside look up zeros, then Σ."""

    def __init__(self, weight, lo: int, group, log: CommLog | None, tag: str):
        super().__init__()
        self.weight = nn.Parameter(weight)  # (V/t, d)
        self.lo, self.hi = lo, lo + weight.shape[0]
        self.group, self.log, self.tag = group, log, tag

    @classmethod
    def from_dense(cls, embedding: nn.Embedding, group=None, *, log=None, tag=""):
        n = tp_block_size(embedding.num_embeddings, group, "vocab_size")
        lo = dist.get_rank(group) * n
        return cls(embedding.weight.detach()[lo : lo + n].clone(), lo, group, log, tag)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:  # (B, N) → (B, N, d)
        mine = (idx >= self.lo) & (idx < self.hi)  # (B, N)
        local = torch.where(mine, idx - self.lo, 0)
        partial = F.embedding(local, self.weight) * mine.unsqueeze(-1)
        return g(partial, self.group, self.log, self.tag)  # Σ over ranks


# --8<-- [end:embedding]


# --8<-- [start:cross_entropy]
def vocab_parallel_cross_entropy(
    logits: torch.Tensor,  # (…, V/t): this rank's block of the vocabulary
    targets: torch.Tensor,  # (…,) ids in 0..V-1
    group=None,
    log: CommLog | None = None,
    tag: str = "cross_entropy",
) -> torch.Tensor:
    """Mean over tokens of log Σ_v e^{z_v} − z_target, the vocabulary never gathered."""
    n = logits.shape[-1]
    lo = dist.get_rank(group) * n
    z_max = logits.detach().amax(dim=-1)  # (…,); a constant shift, so no gradient
    dist.all_reduce(z_max, op=dist.ReduceOp.MAX, group=group)
    if log is not None:
        log.record("all_reduce", "forward", tag, z_max, group)
    z = logits - z_max.unsqueeze(-1)  # (…, V/t), ≤ 0
    sum_exp = g(z.exp().sum(dim=-1), group, log, tag)  # (…,) Σ over all V
    mine = (targets >= lo) & (targets < lo + n)  # the target's logit is on one rank
    local = torch.where(mine, targets - lo, 0).unsqueeze(-1)
    z_target = g(z.gather(-1, local).squeeze(-1) * mine, group, log, tag)  # (…,)
    return (sum_exp.log() - z_target).mean()


# --8<-- [end:cross_entropy]
