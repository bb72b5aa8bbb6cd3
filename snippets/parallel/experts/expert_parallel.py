"""Expert parallelism: the MoE layer's experts split over ranks, tokens sent to them.

``ExpertParallelMoE.from_dense(moe, group)`` keeps the router on every rank and gives
rank r the contiguous block of E/p experts [r·E/p, (r+1)·E/p) (GShard, Lepikhin et
al. 2020; Switch §2.2). Each rank routes its own tokens, then:

1. **dispatch**: one all-to-all sends every kept token-expert assignment to the rank
   that owns the expert (a token going to two experts on one rank is sent twice);
2. each rank runs its experts on what arrived;
3. **combine**: a second all-to-all, the same splits reversed, brings each result home,
   where it is weighted by its gate and summed, as the dense layer does.

Both all-to-alls are ``all_to_all_single`` from send/recv (the all-to-all note), wrapped
so autograd runs the reverse exchange in backward. The split sizes come from a first,
small all-to-all of per-expert counts. Capacity, where set, applies to each rank's own
tokens: the layer on a rank equals the dense layer on that rank's tokens. Parameter
names stay the dense ones (``experts.5.fc.weight`` on the rank that holds expert 5,
``router.weight`` everywhere), so state dicts compare name by name.

    python -m snippets run expert_parallel -n 2
"""

from __future__ import annotations

import copy

import torch
import torch.distributed as dist
import torch.nn as nn

from snippets.comm.collective.all_to_all import all_to_all_single
from snippets.core.claims import law
from snippets.core.cli import main_entry, positive_float, positive_int
from snippets.core.errors import UsageError
from snippets.core.runtime import Spec, device, print0
from snippets.models.moe import MoE, route

SPEC = Spec(
    summary="experts split over ranks, tokens moved by all-to-all, = the dense layer",
    world_size=2,
)


# --8<-- [start:exchange]
class AllToAll(torch.autograd.Function):
    """Rows out by ``send`` counts, rows in by ``recv`` counts; backward sends each
    gradient back the way its row came (the same exchange, splits swapped)."""

    @staticmethod
    def forward(ctx, x, send: list[int], recv: list[int], group, counter: dict):
        ctx.send, ctx.recv, ctx.group, ctx.counter = send, recv, group, counter
        out = x.new_empty(sum(recv), *x.shape[1:])
        all_to_all_single(out, x, recv, send, group)
        counter["forward"] += sum(send) - send[dist.get_rank(group)]  # leave the rank
        return out

    @staticmethod
    def backward(ctx, grad):
        back = grad.new_empty(sum(ctx.send), *grad.shape[1:])
        all_to_all_single(back, grad.contiguous(), ctx.send, ctx.recv, ctx.group)
        ctx.counter["backward"] += sum(ctx.recv) - ctx.recv[dist.get_rank(ctx.group)]
        return back, None, None, None, None


# --8<-- [end:exchange]


# --8<-- [start:layer]
class ExpertParallelMoE(nn.Module):
    def __init__(self, moe: MoE, group: dist.ProcessGroup | None = None):
        super().__init__()
        p, r = dist.get_world_size(group), dist.get_rank(group)
        E = len(moe.experts)
        if E % p:
            raise UsageError(f"{E} experts do not split over {p} ranks: use a divisor")
        self.group, self.E_local, self.first = group, E // p, r * (E // p)
        self.num_experts, self.top_k = E, moe.top_k
        self.capacity_factor = moe.capacity_factor
        self.router = copy.deepcopy(moe.router)
        mine = range(self.first, self.first + self.E_local)
        self.experts = nn.ModuleDict(
            {str(e): copy.deepcopy(moe.experts[e]) for e in mine}
        )
        self.comm = {"forward": 0, "backward": 0}  # rows this rank sent to others
        self.dropped, self.aux_loss = 0, torch.zeros(())
        self.record: list | None = None  # set to a list: each forward's routing

    @classmethod
    def from_dense(cls, moe: MoE, group=None) -> ExpertParallelMoE:
        return cls(moe, group)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (..., d) → (..., d)
        x2 = x.reshape(-1, x.shape[-1])  # (T, d): this rank's tokens
        r = route(self.router, x2, self.top_k, self.capacity_factor)
        token = torch.arange(x2.shape[0], device=x.device).repeat_interleave(self.top_k)
        keep = r.keep.reshape(-1)
        expert, order = r.expert.reshape(-1)[keep].sort(stable=True)  # (A,) by expert
        token, gate = token[keep][order], r.gate.reshape(-1)[keep][order]
        p, El = self.num_experts // self.E_local, self.E_local
        counts = torch.bincount(expert, minlength=self.num_experts)  # (E,) to send
        arrived = torch.empty_like(counts)  # (p·E/p,): from rank j for my expert l
        all_to_all_single(arrived, counts, group=self.group)
        send = counts.view(p, El).sum(1).tolist()  # rows to each rank
        recv = arrived.view(p, El).sum(1).tolist()  # rows from each rank
        got = AllToAll.apply(x2[token], send, recv, self.group, self.comm)  # dispatch
        which = torch.arange(El, device=x.device).repeat(p)  # (p·E/p,) local expert
        local = which.repeat_interleave(arrived)  # (rows,) the expert of each row
        out = torch.zeros_like(got)
        for l, ffn in enumerate(self.experts.values()):
            rows = (local == l).nonzero().squeeze(1)
            if rows.numel():
                out = out.index_copy(0, rows, ffn(got[rows]))
        back = AllToAll.apply(out, recv, send, self.group, self.comm)  # combine
        y = torch.zeros_like(x2).index_add(0, token, gate[:, None] * back)
        self.dropped, self.aux_loss = int((~keep).sum()), r.aux_loss
        if self.record is not None:  # what ran, for the dispatch animation
            self.record.append(
                {
                    "token": token.tolist(),
                    "expert": expert.tolist(),
                    "keep": keep.tolist(),
                    "send": send,
                    "recv": recv,
                }
            )
        return y.view_as(x)


# --8<-- [end:layer]


def crossing(moe: MoE, xs: list, E_local: int) -> torch.Tensor:
    """The oracle for the count, from routing alone: M[i, j] = kept assignments of rank
    i's tokens to experts that rank j holds."""
    p = len(xs)
    M = torch.zeros(p, p, dtype=torch.long)
    for i, x in enumerate(xs):
        r = route(moe.router, x, moe.top_k, moe.capacity_factor)
        owner = r.expert.reshape(-1)[r.keep.reshape(-1)].cpu() // E_local
        M[i] = torch.bincount(owner, minlength=p)
    return M


def add_arguments(parser) -> None:
    parser.add_argument("--experts", type=positive_int, default=4, metavar="E")
    parser.add_argument("--top-k", type=positive_int, default=2, metavar="K")
    parser.add_argument(
        "--capacity-factor", type=positive_float, default=None, metavar="C"
    )


# --8<-- [start:main]
def main(experts: int = 4, top_k: int = 2, capacity_factor: float | None = None):
    """Each rank feeds a different number of tokens; the dense layer sees every rank's
    tokens too, one rank's at a time (capacity counts within a rank's tokens)."""
    p, rank = dist.get_world_size(), dist.get_rank()
    dense = MoE(8, 16, experts, top_k, capacity_factor, seed=3).double().to(device())
    ep = ExpertParallelMoE.from_dense(dense, None)
    counts = [5 + 3 * j for j in range(p)]  # uneven tokens per rank
    g = torch.Generator().manual_seed(0)
    xs = [torch.randn(n, 8, dtype=torch.float64, generator=g) for n in counts]
    xs = [t.to(device()) for t in xs]
    x = xs[rank].clone().requires_grad_()
    y = ep(x)
    (y * y).sum().backward()  # a loss that is a sum over tokens, as the dense one
    whole = torch.cat(xs).requires_grad_()
    ref = torch.cat([dense(t) for t in whole.split(counts)])
    (ref * ref).sum().backward()
    mine = slice(sum(counts[:rank]), sum(counts[: rank + 1]))
    gaps = {
        "output": (y - ref[mine]).abs().max(),
        "input grad": (x.grad - whole.grad[mine]).abs().max(),
    }
    for name, prm in ep.named_parameters():  # an expert no token reached: no grad
        grad, ref_prm = prm.grad, dense.get_parameter(name)
        grad = torch.zeros_like(prm) if grad is None else grad.clone()
        if name.startswith("router"):
            dist.all_reduce(grad)  # each rank's router saw its tokens only
        ref_grad = ref_prm.grad if ref_prm.grad is not None else torch.zeros_like(grad)
        gaps[name] = (grad - ref_grad).abs().max()
    worst = torch.stack(list(gaps.values())).max()
    dist.all_reduce(worst, op=dist.ReduceOp.MAX)
    law(worst < 1e-12, {k: float(v) for k, v in gaps.items() if v >= 1e-12})
    with torch.no_grad():
        M = crossing(dense, xs, ep.E_local)
    off = M - torch.diag(M.diagonal())  # assignments that cross ranks
    want = int(off[rank].sum() + off[:, rank].sum())  # dispatch out + combine out
    law(ep.comm == {"forward": want, "backward": want}, (ep.comm, want))
    print0(
        f"{p} ranks × {experts // p} experts, top-{top_k}, tokens {counts}: "
        f"= dense (max |Δ| {worst.item():.0e}) ✓"
    )
    print0(
        f"rows that cross ranks: {int(off.sum())}; rank 0 sent {ep.comm['forward']} "
        "forward and as many backward = routing's count ✓"
    )
    return {
        "world_size": p,
        "max_abs_diff": worst.item(),
        "tokens": counts,
        "crossing": M.tolist(),
    }


# --8<-- [end:main]

if __name__ == "__main__":
    raise SystemExit(main_entry(main, SPEC))
