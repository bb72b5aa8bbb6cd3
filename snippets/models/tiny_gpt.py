"""The one model: a GPT shaped like nanoGPT's, small enough for a laptop CPU.

Every parallel module slices this model instead of writing its own. Its pieces are
addressable by name, so a strategy swaps or splits them in place:

* ``tok_emb``, ``pos_emb``: token and position embeddings; ``embed(idx, positions)``
  takes the positions explicitly, so a context-parallel shard embeds its own.
* ``blocks``: an ``nn.ModuleList``; a pipeline stage runs ``blocks[a:b]``.
* ``block.attn.q``, ``.k``, ``.v``: three separate ``Linear`` (d → d); the head count is
  read from their output width, so column-split copies with H/t heads run unchanged.
  ``block.attn.proj`` (d → d) is the row-split partner.
* ``block.attn.attention(q, k, v)``: causal SDPA on (B, H, N, d/H); replace it (ring
  attention) without touching the block.
* ``block.mlp.fc`` (d → 4d) and ``block.mlp.proj`` (4d → d): column, then row split.
  With ``num_experts`` E > 0 the MLP is a mixture of E such experts instead
  (``moe.MoE``: ``block.mlp.router``, ``block.mlp.experts[e].fc``, top-k routing), and
  the training loss adds α times each block's balance loss (``sequence_balance_loss``,
  replaceable as ``block.balance_loss``). E = 0, the default, is the dense model.
* ``head(x)``: final LayerNorm and the output projection (``lm_head``, tied to
  ``tok_emb`` unless ``tie_embeddings=False``).
* ``random_batch(cfg, rows)``: ids and targets to train on, the same on every rank.

Initialisation follows GPT-2 (N(0, 0.02), residual projections scaled by 1/√(2L)) and
depends only on ``seed``, never on the caller's random state, so every rank builds the
same weights. ``GPTConfig.num_params()`` is a formula; the test counts the parameters.

    python -m snippets run tiny_gpt
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Callable

import torch
import torch.nn as nn
import torch.nn.functional as F

from snippets.core.claims import law
from snippets.core.cli import main_entry
from snippets.core.parts import Excerpt
from snippets.core.runtime import Spec, print0
from snippets.models.moe import MoE

SPEC = Spec(summary="the shared GPT: parameter count by formula, one forward/backward")
MOE_FIELDS = ("num_experts", "top_k", "capacity_factor", "aux_loss_coef")


# --8<-- [start:config]
@dataclass(frozen=True)
class GPTConfig:
    vocab_size: int = 64  # V: token ids 0..V-1; the logits are (B, N, V)
    block_size: int = 16  # longest sequence N: rows of the position embedding
    n_layer: int = 2  # L: transformer blocks
    n_head: int = 2  # H: attention heads; n_embd must be a multiple of it
    n_embd: int = 32  # d: model width; each head has d/H, the MLP 4d
    dropout: float = 0.0  # after embeddings and residual branches; 0 = deterministic
    bias: bool = True  # biases in every Linear and LayerNorm (GPT-2 has them)
    tie_embeddings: bool = True  # lm_head reuses tok_emb's (V, d) weight, as GPT-2
    num_experts: int = 0  # E: 0 = dense MLPs; E > 0 = each MLP a mixture of E experts
    top_k: int = 1  # k: the experts each token visits (mixture only)
    capacity_factor: float | None = None  # Switch's c; None drops no token
    aux_loss_coef: float = 0.01  # α: the balance loss's weight (Switch's 10⁻²)

    def __post_init__(self) -> None:
        if self.n_embd % self.n_head:
            raise ValueError(f"n_embd={self.n_embd} is not a multiple of {self.n_head}")
        E, k, c = self.num_experts, self.top_k, self.capacity_factor
        if E < 0:
            raise ValueError(f"num_experts={E} must be 0 (dense MLPs) or more")
        if E and not 1 <= k <= E:
            raise ValueError(f"top_k={k} must be 1 to num_experts={E}")
        if c is not None and not c > 0:
            raise ValueError(f"capacity_factor={c} must be above 0, or None")

    def num_params(self) -> int:
        """Parameters, counted from the shapes (a tied head adds none)."""
        V, N, L, d = self.vocab_size, self.block_size, self.n_layer, self.n_embd
        b = int(self.bias)
        layer_norm = d + b * d  # weight, bias
        attention = 4 * (d * d + b * d)  # q, k, v, proj
        mlp = (d * 4 * d + b * 4 * d) + (4 * d * d + b * d)  # fc, proj
        if self.num_experts:  # router (no bias), E experts (moe.Expert: with biases)
            E = self.num_experts
            mlp = d * E + E * (d * 4 * d + 4 * d + 4 * d * d + d)
        block = 2 * layer_norm + attention + mlp  # dense: 12d² + (2 + 11b)·d
        head = 0 if self.tie_embeddings else V * d
        return V * d + N * d + L * block + layer_norm + head


# --8<-- [end:config]


# --8<-- [start:attention]
def causal_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """softmax(q kᵀ/√(d/H) + causal mask) v; all (B, H, N, d/H)."""
    return F.scaled_dot_product_attention(q, k, v, is_causal=True)


class CausalSelfAttention(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        d = cfg.n_embd
        self.head_dim = d // cfg.n_head
        self.q = nn.Linear(d, d, bias=cfg.bias)
        self.k = nn.Linear(d, d, bias=cfg.bias)
        self.v = nn.Linear(d, d, bias=cfg.bias)
        self.proj = nn.Linear(d, d, bias=cfg.bias)
        self.drop = nn.Dropout(cfg.dropout)
        self.attention: Callable[..., torch.Tensor] = causal_attention

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # x: (B, N, d)
        B, N, _ = x.shape

        def heads(t: torch.Tensor) -> torch.Tensor:  # (B, N, H·d/H) → (B, H, N, d/H)
            H = t.shape[-1] // self.head_dim  # from the width: a column split has H/t
            return t.view(B, N, H, self.head_dim).transpose(1, 2)

        a = self.attention(heads(self.q(x)), heads(self.k(x)), heads(self.v(x)))
        a = a.transpose(1, 2).flatten(2)  # (B, N, H·d/H)
        return self.drop(self.proj(a))  # (B, N, d)


# --8<-- [end:attention]


# --8<-- [start:block]
class MLP(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.fc = nn.Linear(cfg.n_embd, 4 * cfg.n_embd, bias=cfg.bias)
        self.proj = nn.Linear(4 * cfg.n_embd, cfg.n_embd, bias=cfg.bias)
        self.drop = nn.Dropout(cfg.dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, N, d) → (B, N, d)
        return self.drop(self.proj(F.gelu(self.fc(x))))  # hidden (B, N, 4d)


class Block(nn.Module):
    """Pre-norm (GPT-2): x + attn(ln1(x)), then x + mlp(ln2(x)). A mixture-of-experts
    block also leaves its balance loss, one per sequence, in ``aux_loss`` (B,)."""

    def __init__(self, cfg: GPTConfig):
        super().__init__()
        d, E = cfg.n_embd, cfg.num_experts
        self.ln1 = nn.LayerNorm(d, bias=cfg.bias)
        self.attn = CausalSelfAttention(cfg)
        self.ln2 = nn.LayerNorm(d, bias=cfg.bias)
        self.mlp = (
            MLP(cfg) if not E else MoE(d, 4 * d, E, cfg.top_k, cfg.capacity_factor)
        )
        self.balance_loss: Callable[..., torch.Tensor] = sequence_balance_loss
        self.aux_loss: torch.Tensor | None = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, N, d) → (B, N, d)
        x = x + self.attn(self.ln1(x))
        h = self.ln2(x)
        if hasattr(self.mlp, "router"):  # experts: (B,) balance losses
            self.aux_loss = self.balance_loss(self.mlp.router, h, self.mlp.top_k)
        return x + self.mlp(h)


# --8<-- [end:block]


# --8<-- [start:balance]
def sequence_balance_loss(
    router: nn.Linear,
    h: torch.Tensor,
    top_k: int,
    tokens: int | None = None,
    count_all: Callable[[torch.Tensor], torch.Tensor] | None = None,
) -> torch.Tensor:
    """Switch's E · Σ_i f_i · P_i over each sequence alone, not over the batch
    (DeepSeek-V3's sequence-wise balance loss): h (B, n, d) → (B,).

    f_i: the share of a sequence's k·N assignments routed to expert i; P_i: its mean
    router probability, Σ over the sequence ÷ ``tokens`` (N by default). A rank that
    holds n of a sequence's N tokens passes ``count_all`` (sum its counts over the
    ranks holding the rest) and the tokens its loss is a mean over."""
    probs = torch.softmax(router(h), dim=-1)  # (B, n, E), the router run again
    E = probs.shape[-1]
    chosen = F.one_hot(probs.topk(top_k, dim=-1).indices, E)  # (B, n, k, E)
    counts = chosen.sum((1, 2)).to(probs.dtype)  # (B, E): no gradient, as in Switch
    if count_all is not None:
        counts = count_all(counts)
    f = counts / counts.sum(-1, keepdim=True)  # (B, E)
    P = probs.sum(1) / (tokens or h.shape[1])  # (B, E)
    return E * (f * P).sum(-1)


# --8<-- [end:balance]


# --8<-- [start:gpt]
class GPT(nn.Module):
    def __init__(self, config: GPTConfig, seed: int = 0):
        super().__init__()
        self.config = cfg = config
        with torch.random.fork_rng(devices=[]):  # the caller's random state is kept
            torch.manual_seed(seed)
            self.tok_emb = nn.Embedding(cfg.vocab_size, cfg.n_embd)  # (V, d)
            self.pos_emb = nn.Embedding(cfg.block_size, cfg.n_embd)  # (N_max, d)
            self.drop = nn.Dropout(cfg.dropout)
            self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layer))
            self.ln_f = nn.LayerNorm(cfg.n_embd, bias=cfg.bias)
            self.lm_head = nn.Linear(cfg.n_embd, cfg.vocab_size, bias=False)
            if cfg.tie_embeddings:
                self.lm_head.weight = self.tok_emb.weight
            self.apply(self._init)
            for name, p in self.named_parameters():  # GPT-2: residual writes shrink
                if name.endswith("proj.weight"):
                    nn.init.normal_(p, std=0.02 / math.sqrt(2 * cfg.n_layer))

    @staticmethod
    def _init(m: nn.Module) -> None:
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, std=0.02)
        if isinstance(m, nn.Linear) and m.bias is not None:
            nn.init.zeros_(m.bias)

    def embed(
        self, idx: torch.Tensor, positions: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Token ids (B, N) → x (B, N, d); positions (N,) default to 0..N-1."""
        if positions is None:
            positions = torch.arange(idx.shape[1], device=idx.device)
        return self.drop(self.tok_emb(idx) + self.pos_emb(positions))

    def head(self, x: torch.Tensor) -> torch.Tensor:  # (B, N, d) → logits (B, N, V)
        return self.lm_head(self.ln_f(x))

    def forward(
        self, idx: torch.Tensor, targets: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """idx, targets: (B, N) ids → logits (B, N, V), mean cross-entropy (or None)."""
        x = self.embed(idx)
        for block in self.blocks:
            x = block(x)
        logits = self.head(x)
        if targets is None:
            return logits, None
        loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten())
        if self.config.num_experts:  # + α · Σ over blocks of the mean over sequences
            aux = sum(b.aux_loss.sum() / max(len(b.aux_loss), 1) for b in self.blocks)
            loss = loss + self.config.aux_loss_coef * aux
        return logits, loss


# --8<-- [end:gpt]


def random_batch(
    cfg: GPTConfig,
    rows: int,
    *,
    seed: int = 1,
    steps: int | None = None,
    device: torch.device | str | None = None,
) -> tuple[torch.Tensor, torch.Tensor] | list[tuple[torch.Tensor, torch.Tensor]]:
    """Token ids and targets, each (rows, block_size), uniform over the vocabulary.

    They depend only on ``seed``: drawn on the CPU from a generator of their own (the
    caller's random state is kept), then moved to ``device``, so every rank and every
    device gets the same batch. With ``steps``, a list of that many (idx, targets)
    pairs drawn one after another from that one generator: the first is the batch
    ``steps=None`` returns."""
    g = torch.Generator().manual_seed(seed)
    shape = (2, rows, cfg.block_size)  # idx and targets, drawn together
    pairs = []
    for _ in range(1 if steps is None else steps):
        idx, targets = torch.randint(cfg.vocab_size, shape, generator=g).to(device)
        pairs.append((idx, targets))
    return pairs[0] if steps is None else pairs


def reference_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor):
    """The formula written out: an oracle for ``causal_attention``."""
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (B, H, N, N)
    s = s.masked_fill(torch.ones_like(s, dtype=torch.bool).triu(1), float("-inf"))
    return torch.softmax(s, dim=-1) @ v


def main() -> dict:
    odd = GPTConfig(37, 7, 3, 3, 15, bias=False, tie_embeddings=False)
    rows, experts = [], GPTConfig(num_experts=4, top_k=2)
    for name, c in (("default", GPTConfig()), ("odd", odd), ("experts", experts)):
        counted = sum(p.numel() for p in GPT(c).parameters())
        law(counted == c.num_params(), f"{name}: {counted} ≠ {c.num_params()}")
        fields = {k: v for k, v in asdict(c).items() if k not in MOE_FIELDS}
        if not c.num_experts:  # the table shows the dense configs
            rows.append({"config": name, **fields, "formula": c.num_params()})
            rows[-1]["counted"] = counted
    cfg = GPTConfig()
    model, (idx, targets) = GPT(cfg), random_batch(cfg, rows=2)
    logits, loss = model(idx, targets)  # logits (B, N, V)
    loss.backward()
    law(
        all(p.grad is not None and p.grad.isfinite().all() for p in model.parameters()),
        "every parameter has a finite gradient",
    )
    # Weights of std 0.02 make the logits near 0: the first loss is about ln V.
    law(abs(loss.item() - math.log(cfg.vocab_size)) < 0.05, loss.item())
    with torch.no_grad():  # the pieces by hand, attention written out: the same logits
        x = model.embed(idx)
        for block in model.blocks:
            block.attn.attention = reference_attention
            x = block(x)
        torch.testing.assert_close(model.head(x), logits)
    for r in rows:
        print0(
            f"{r['config']:>7}: V={r['vocab_size']} N={r['block_size']} "
            f"L={r['n_layer']} H={r['n_head']} d={r['n_embd']} bias={r['bias']} "
            f"tied={r['tie_embeddings']}: {r['formula']:,} params, formula = count ✓"
        )
    said = Excerpt()  # what the note shows: the two checks of the forward pass
    said(f"loss at init {loss.item():.3f} ≈ ln V = {math.log(cfg.vocab_size):.3f} ✓")
    said("embed → blocks → head with the attention written out = forward ✓")
    return {
        "tables": {"configs": rows},
        "excerpts": {"summary": said.lines},
        "loss": loss.item(),
    }


if __name__ == "__main__":
    raise SystemExit(main_entry(main, SPEC))
