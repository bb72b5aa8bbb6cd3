"""Expert parallelism against the dense layer in fp64 on 2, 3 and 4 ranks: outputs,
input gradients, each expert's gradient on its owner, the router's gradient summed over
ranks; uneven tokens per rank, an expert that no token picks, capacity drops; rows
moved counted at the calls against a count from routing; dense parameter names; and
the command line's one-line refusals."""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist
from conftest import refused

from snippets.core.runtime import launch
from snippets.models.moe import MoE, route
from snippets.parallel.experts import expert_parallel as EP

F64 = torch.float64


def grad(q: torch.nn.Parameter) -> torch.Tensor:
    return torch.zeros_like(q) if q.grad is None else q.grad


def compare_rank(E: int, k: int, c: float | None, starve: bool) -> dict:
    p, rank = dist.get_world_size(), dist.get_rank()
    dense = MoE(6, 8, E, top_k=k, capacity_factor=c, seed=5).to(F64)
    if starve:  # expert 0 scores far below the rest: no token ever picks it
        with torch.no_grad():
            dense.router.weight[0] = -50 * dense.router.weight[1:].abs().sum(0)
    ep = EP.ExpertParallelMoE.from_dense(dense)
    counts = [3 + 4 * j for j in range(p)]
    g = torch.Generator().manual_seed(7)
    xs = [torch.randn(n, 6, dtype=F64, generator=g).abs() for n in counts]
    w = torch.randn(sum(counts), 6, dtype=F64, generator=g)  # loss weights
    x = xs[rank].clone().requires_grad_()
    mine = slice(sum(counts[:rank]), sum(counts[: rank + 1]))
    (ep(x) * w[mine]).sum().backward()
    y = ep(x.detach())
    whole = torch.cat(xs).requires_grad_()
    ref = torch.cat([dense(t) for t in whole.split(counts)])
    (ref * w).sum().backward()
    router_grad = ep.router.weight.grad.clone()
    dist.all_reduce(router_grad)
    expert_gaps = {  # an expert no token reached has no gradient on either side
        n: (grad(q) - grad(dense.get_parameter(n))).abs().max().item()
        for n, q in ep.named_parameters()
        if n.startswith("experts")
    }
    M = EP.crossing(dense, xs, ep.E_local)
    picks_of_expert_0 = sum(
        int((route(dense.router, t, k, c).expert == 0).sum()) for t in xs
    )
    off = M - torch.diag(M.diagonal())
    return {
        "names": sorted(n for n, _ in ep.named_parameters()),
        "out": (y - ref[mine].detach()).abs().max().item(),
        "in_grad": (x.grad - whole.grad[mine]).abs().max().item(),
        "router": (router_grad - dense.router.weight.grad).abs().max().item(),
        "experts": expert_gaps,
        "comm": dict(ep.comm),  # two forwards (one with grad) and one backward
        "want": int(off[rank].sum() + off[:, rank].sum()),
        "dropped": ep.dropped,
        "starved": picks_of_expert_0,
    }


@pytest.mark.parametrize(
    "p,E,k,c,starve",
    [(2, 4, 1, None, True), (3, 6, 2, None, False), (4, 8, 2, 0.5, False)],
)
def test_equals_the_dense_layer(p, E, k, c, starve) -> None:
    results = launch(compare_rank, p, "gloo", 60, args=(E, k, c, starve))
    every = set()
    for rank, r in enumerate(results):
        held = {f"experts.{e}" for e in range(rank * E // p, (rank + 1) * E // p)}
        assert {n.rsplit(".", 2)[0] for n in r["names"] if "experts" in n} == held
        assert "router.weight" in r["names"]
        every |= set(r["experts"])
        assert max(r["out"], r["in_grad"], r["router"], *r["experts"].values()) < 1e-12
        assert r["comm"] == {"forward": 2 * r["want"], "backward": r["want"]}
    assert len(every) == 4 * E  # fc/proj weight/bias of every expert, each on one rank
    assert (results[0]["starved"] == 0) == starve  # the case has an idle expert
    if c is not None:
        assert sum(r["dropped"] for r in results) > 0


@pytest.mark.parametrize(
    "args,words",
    [(["--top-k", "0"], "--top-k: must be at least 1"),
     (["--top-k", "5"], "top-k must be 1 to 4"),
     (["--capacity-factor", "-1"], "--capacity-factor: must be greater than 0"),
     (["--experts", "3"], "3 experts do not split over 2 ranks")],
)  # fmt: skip
def test_bad_input_is_one_line_and_exit_2(args, words, capfd) -> None:
    assert words in refused(["run", "expert_parallel", *args], capfd)
