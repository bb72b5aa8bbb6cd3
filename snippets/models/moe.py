"""A mixture-of-experts layer in one process: a router, E feed-forward experts, top-k.

Each token x (d,) gets router probabilities p = softmax(W_r x) over the E experts and
goes to the k most probable ones. Its output is y = Σ_{i ∈ top-k} p_i(x) · E_i(x):
the gates are the router's own probabilities, not renormalised over the k chosen
(Shazeer et al. 2017; Switch Transformer, Fedus et al. 2021, eq. 2). With k = 1 the
router still gets a gradient through p_i; Mixtral's renormalisation would make that
gate 1.

Capacity (Switch §2.2): with ``capacity_factor`` c, expert i takes at most
C = ⌈c · k · T / E⌉ of the T·k token-expert assignments of a batch. Assignments queue
first choices before second choices (GShard), tokens in order within each; those past
C are dropped and add nothing to y (the block's residual carries the token on). After
each forward ``dropped`` holds how many were dropped and ``load`` how many each expert
kept. ``capacity_factor=None`` drops nothing.

The auxiliary loss (Switch eq. 4, without its α) is E · Σ_i f_i · P_i, where f_i is the
share of the T·k assignments routed to expert i and P_i the mean router probability of
expert i. It is 1 when routing is uniform and grows as it concentrates; adding α times
it to the training loss pushes the router back towards balance (see ``main``).

    python -m snippets run moe
"""

from __future__ import annotations

import math
import textwrap
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from snippets.core.claims import Observation, check, law
from snippets.core.cli import main_entry
from snippets.core.errors import UsageError
from snippets.core.runtime import Spec, print0

SPEC = Spec(summary="a mixture-of-experts layer: top-k routing, capacity, aux loss")
ALPHA = 0.1  # the auxiliary loss's weight in the collapse run


# --8<-- [start:route]
class Expert(nn.Module):
    """One feed-forward expert, the tiny GPT's MLP with its own width."""

    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.fc = nn.Linear(dim, hidden)
        self.proj = nn.Linear(hidden, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (t, d) → (t, d)
        return self.proj(F.gelu(self.fc(x)))


@dataclass
class Routing:
    expert: torch.Tensor  # (T, k) long: the chosen experts, best first
    gate: torch.Tensor  # (T, k): their router probabilities p_i(x)
    keep: torch.Tensor  # (T, k) bool: within its expert's capacity
    aux_loss: torch.Tensor  # (): E · Σ f_i · P_i


def check_routing(num_experts: int, top_k: int, capacity_factor: float | None):
    if num_experts < 1:
        raise UsageError(f"num_experts must be at least 1, got {num_experts}")
    if not 1 <= top_k <= num_experts:
        raise UsageError(f"top-k must be 1 to {num_experts} (the experts), got {top_k}")
    if capacity_factor is not None and not capacity_factor > 0:
        raise UsageError(f"capacity factor must be above 0, got {capacity_factor}")


def route(
    router: nn.Linear, x: torch.Tensor, top_k: int, capacity_factor: float | None
) -> Routing:
    """x (T, d) → each token's top-k experts, gates, and which assignments fit."""
    T, E = x.shape[0], router.out_features
    probs = torch.softmax(router(x), dim=-1)  # (T, E)
    gate, expert = probs.topk(top_k, dim=-1)  # (T, k) each
    choice_major = expert.t().reshape(-1)  # (k·T,): all first choices, then seconds
    one_hot = F.one_hot(choice_major, E)  # (k·T, E)
    if capacity_factor is None:
        keep = torch.ones_like(expert, dtype=torch.bool)
    else:
        capacity = math.ceil(capacity_factor * top_k * T / E)
        place = (one_hot.cumsum(0) * one_hot).sum(-1) - 1  # (k·T,) queue position
        keep = (place < capacity).view(top_k, T).t()  # (T, k)
    f = one_hot.sum(0) / max(top_k * T, 1)  # (E,) share of assignments, before drops
    P = probs.mean(0) if T else probs.sum(0)  # (E,) mean router probability
    return Routing(expert, gate, keep, E * (f * P).sum())


# --8<-- [end:route]


# --8<-- [start:moe]
class MoE(nn.Module):
    def __init__(
        self,
        dim: int,
        hidden: int,
        num_experts: int,
        top_k: int = 1,
        capacity_factor: float | None = None,
        seed: int = 0,
    ):
        super().__init__()
        check_routing(num_experts, top_k, capacity_factor)
        self.top_k, self.capacity_factor = top_k, capacity_factor
        with torch.random.fork_rng(devices=[]):  # weights depend on the seed alone
            torch.manual_seed(seed)
            self.router = nn.Linear(dim, num_experts, bias=False)
            self.experts = nn.ModuleList(
                Expert(dim, hidden) for _ in range(num_experts)
            )
        self.dropped, self.load = 0, torch.zeros(num_experts, dtype=torch.long)
        self.aux_loss = torch.zeros(())

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (..., d) → (..., d)
        x2 = x.reshape(-1, x.shape[-1])  # (T, d)
        r = route(self.router, x2, self.top_k, self.capacity_factor)
        token = torch.arange(x2.shape[0], device=x.device).repeat_interleave(self.top_k)
        expert, gate = r.expert.reshape(-1), r.gate.reshape(-1)  # (T·k,) token-major
        keep = r.keep.reshape(-1)
        y = torch.zeros_like(x2)
        for e, ffn in enumerate(self.experts):
            mine = keep & (expert == e)  # the assignments expert e serves
            rows = token[mine]
            if rows.numel():
                y = y.index_add(0, rows, gate[mine, None] * ffn(x2[rows]))
        self.dropped = int((~keep).sum())
        self.load = torch.bincount(expert[keep], minlength=len(self.experts)).cpu()
        self.aux_loss = r.aux_loss
        return y.view_as(x)


# --8<-- [end:moe]


def per_token(moe: MoE, x: torch.Tensor) -> torch.Tensor:
    """The oracle: one token at a time, the paper's sum written out, capacity counted
    in the queue order the module states (first choices, then seconds)."""
    x2 = x.reshape(-1, x.shape[-1])
    T, E, k = x2.shape[0], len(moe.experts), moe.top_k
    limit = math.inf
    if moe.capacity_factor is not None:
        limit = math.ceil(moe.capacity_factor * k * T / E)
    ranked = []
    for t in range(T):
        p = torch.softmax(moe.router.weight @ x2[t], dim=0).tolist()
        ranked.append(sorted(range(E), key=lambda i: -p[i])[:k])
    taken, served = [0] * E, set()
    for c in range(k):
        for t in range(T):
            e = ranked[t][c]
            if taken[e] < limit:
                taken[e] += 1
                served.add((t, e))
    rows = []
    for t in range(T):
        p = torch.softmax(moe.router.weight @ x2[t], dim=0)
        out = torch.zeros_like(x2[t])
        for e in ranked[t]:
            if (t, e) in served:
                out = out + p[e] * moe.experts[e](x2[t : t + 1])[0]
        rows.append(out)
    return torch.stack(rows).view_as(x)


# --8<-- [start:collapse]
def train_router(alpha: float, steps: int = 200, seed: int = 0) -> dict:
    """Fit a top-1 MoE to a fixed random map, with α · aux_loss added or not; report
    the share of tokens each expert serves at the end. Without the auxiliary loss an
    expert that starts slightly ahead trains on more tokens, gets better, is chosen
    more: routing collapses onto a few experts."""
    g = torch.Generator().manual_seed(seed)
    d, E, T = 16, 8, 128
    moe = MoE(d, 32, E, top_k=1, seed=seed)
    target = torch.randn(d, d, generator=g) / d**0.5
    opt = torch.optim.Adam(moe.parameters(), lr=1e-2)
    for _ in range(steps):
        x = torch.randn(T, d, generator=g)
        loss = F.mse_loss(moe(x), torch.tanh(x @ target))
        opt.zero_grad()
        (loss + alpha * moe.aux_loss).backward()
        opt.step()
    with torch.no_grad():
        moe(torch.randn(4 * T, d, generator=g))
    share = (moe.load.double() / moe.load.sum()).tolist()
    return {"alpha": alpha, "share": share, "busiest": max(share), "loss": loss.item()}


# --8<-- [end:collapse]


def main() -> dict:
    torch.manual_seed(0)
    rows = []
    for k, c in ((1, None), (2, None), (1, 1.0), (2, 0.5)):
        moe = MoE(8, 16, 4, top_k=k, capacity_factor=c).double()
        x = torch.randn(2, 11, 8, dtype=torch.float64)
        gap = (moe(x) - per_token(moe, x)).abs().max().item()
        law(gap < 1e-12, f"top-{k}, capacity {c}: differs from the loop by {gap}")
        rows.append(
            {"top-k": k, "capacity factor": "none" if c is None else c,
             "dropped": moe.dropped, "aux loss": round(moe.aux_loss.item(), 3),
             "max |Δ| vs per-token loop": f"{gap:.0e}"}
        )  # fmt: skip
    print0(f"{len(rows)} routing cases (top-k, capacity) equal the per-token loop ✓")
    runs = [train_router(0.0), train_router(ALPHA)]
    for r in runs:
        E = len(r["share"])
        print0(
            f"α = {r['alpha']}: the busiest of {E} experts serves "
            f"{r['busiest']:.0%} of the tokens (an even share: {1 / E:.1%})"
        )
    without, with_aux = runs
    facts = {"alpha": ALPHA, "without": without["busiest"], "with": with_aux["busiest"]}
    (said,) = check([BALANCE], facts)
    print0(textwrap.fill(said, 88))
    load = [
        {"expert": e, "share, α = 0": round(a, 3), f"share, α = {ALPHA}": round(b, 3)}
        for e, (a, b) in enumerate(zip(without["share"], with_aux["share"]))
    ]
    return {
        "tables": {"checks": rows, "load": load},
        "markdown": {"balance": said},
        "collapse": runs,
    }


# Which expert wins, and by how much, is training on this machine's rounding: said.
BALANCE = Observation(
    says={
        "balanced": "With the auxiliary loss at α = {alpha} the busiest expert serves "
        "{with:.0%} of the tokens, against {without:.0%} without it: the loss spread "
        "them.",
        "not": "With the auxiliary loss at α = {alpha} the busiest expert serves "
        "{with:.0%} of the tokens, against {without:.0%} without it: on this run the "
        "loss did not spread them.",
    },
    judge=lambda f: "balanced" if f["with"] < f["without"] else "not",
    cases={
        "balanced": {"alpha": 0.1, "with": 0.3, "without": 0.9},
        "not": {"alpha": 0.1, "with": 0.9, "without": 0.9},
    },
)


if __name__ == "__main__":
    raise SystemExit(main_entry(main, SPEC))
