"""Every hand-made collective against torch.distributed's own, on 3 and 5 ranks (1, 2,
4, 6, 7, 8 marked slow), odd lengths, roots that are not rank 0, sub-groups, and bad
input that must raise on every rank; the barrier by timing, a check that a barrier
that does not wait fails."""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist
from torch.distributed import ReduceOp

from snippets.comm.collective import collectives as C
from snippets.core.runtime import device, launch


def _x(n: int, seed: int, dtype: torch.dtype = torch.int64) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    x = (
        torch.randn(n, generator=g, dtype=dtype)
        if dtype.is_floating_point
        else torch.randint(-3, 4, (n,), generator=g)
    )
    return x.to(device())


def collectives_rank() -> list[str]:
    p, me = dist.get_world_size(), dist.get_rank()
    bad: list[str] = []

    def check(name: str, ok: bool) -> None:
        if not ok:
            bad.append(f"p={p} rank {me}: {name}")

    for n in (1, p + 2):
        for root in sorted({0, p - 1, p // 2}):
            x = _x(n, me)
            a, b = x.clone(), x.clone()
            C.broadcast(a, root), dist.broadcast(b, root)
            check(f"broadcast n={n} root={root}", torch.equal(a, b))
            pieces = [_x(n, 100 + j) for j in range(p)]
            a, b = torch.empty_like(x), torch.empty_like(x)
            C.scatter(a, pieces if me == root else None, src=root)
            dist.scatter(b, pieces if me == root else None, src=root)
            check(f"scatter n={n} root={root}", torch.equal(a, b))
            la, lb = (
                [torch.empty_like(x) for _ in range(p)],
                [torch.empty_like(x) for _ in range(p)],
            )
            C.gather(x, la if me == root else None, dst=root)
            dist.gather(x, lb if me == root else None, dst=root)
            check(
                f"gather n={n} root={root}", me != root or all(map(torch.equal, la, lb))
            )
            for op_name, op in (
                ("SUM", ReduceOp.SUM),
                ("PRODUCT", ReduceOp.PRODUCT),
                ("MIN", ReduceOp.MIN),
                ("MAX", ReduceOp.MAX),
            ):
                a, b = x.clone(), x.clone()
                C.reduce(a, root, op), dist.reduce(b, root, op)
                check(
                    f"reduce {op_name} n={n} root={root}",
                    torch.equal(a, b) if me == root else torch.equal(a, x),
                )
        x = _x(n, me)
        la, lb = (
            [torch.empty_like(x) for _ in range(p)],
            [torch.empty_like(x) for _ in range(p)],
        )
        C.all_gather(la, x), dist.all_gather(lb, x)
        check(f"all_gather n={n}", all(map(torch.equal, la, lb)))
        for dtype in (torch.int64, torch.float64):
            inputs = [_x(n, 10 * me + j, dtype) for j in range(p)]
            for op in (ReduceOp.SUM, ReduceOp.MAX) + (
                (ReduceOp.AVG,) if dtype.is_floating_point else ()
            ):
                a, b = (
                    torch.empty(n, dtype=dtype, device=device()),
                    torch.empty(n, dtype=dtype, device=device()),
                )
                C.reduce_scatter(a, inputs, op), dist.reduce_scatter(b, inputs, op)
                check(
                    f"reduce_scatter {op} {dtype} n={n}",
                    torch.allclose(a, b, rtol=1e-12, atol=1e-12)
                    if dtype.is_floating_point
                    else torch.equal(a, b),
                )
        ins = [_x(n, 10 * me + j) for j in range(p)]
        la, lb = (
            [torch.empty(n, dtype=torch.int64, device=device()) for _ in range(p)]
            for _ in range(2)
        )
        C.all_to_all(la, ins), dist.all_to_all(lb, ins)
        check(f"all_to_all n={n}", all(map(torch.equal, la, lb)))
    uneven_in = [_x((me + 2 * j) % 3, me) for j in range(p)]  # some pieces are empty
    uneven_out = [
        torch.empty((j + 2 * me) % 3, dtype=torch.int64, device=device())
        for j in range(p)
    ]
    C.all_to_all(uneven_out, uneven_in)
    everyone: list = [None] * p
    dist.all_gather_object(everyone, uneven_in)
    check(
        "all_to_all, uneven",
        all(torch.equal(uneven_out[j], everyone[j][me]) for j in range(p)),
    )
    C.barrier()
    odds = dist.new_group([r for r in range(p) if r % 2 == 1]) if p > 1 else None
    evens = dist.new_group([r for r in range(p) if r % 2 == 0])
    group = odds if me % 2 == 1 else evens
    members = dist.get_process_group_ranks(group)
    x = _x(3, me)
    a, b = x.clone(), x.clone()
    (
        C.broadcast(a, members[-1], group=group),
        dist.broadcast(b, members[-1], group=group),
    )
    check("broadcast in a sub-group, global src", torch.equal(a, b))
    a, b = x.clone(), x.clone()
    C.reduce(a, members[-1], group=group), dist.reduce(b, members[-1], group=group)
    check("reduce in a sub-group, global dst", me != members[-1] or torch.equal(a, b))
    la, lb = (
        [torch.empty_like(x) for _ in members],
        [torch.empty_like(x) for _ in members],
    )
    C.all_gather(la, x, group=group), dist.all_gather(lb, x, group=group)
    check("all_gather in a sub-group", all(map(torch.equal, la, lb)))
    C.barrier(group=group)
    return bad


def barrier_rank() -> dict:
    """The same timing check around our barrier, torch's, and one that does not wait:
    the check must pass the first two and catch the third."""
    out = {}
    for name, fn in (
        ("ours", C.barrier),
        ("torch", dist.barrier),
        ("no-op", lambda: None),
    ):
        last_in, first_out = C.barrier_times(fn, delay_s=0.3)
        out[name] = first_out - last_in  # ≥ 0: nobody left before the last came
    p, me = dist.get_world_size(), dist.get_rank()
    group = dist.new_group(list(range(1, p)))  # every rank but 0
    if me != 0:
        t = C.barrier_times(lambda: C.barrier(group=group), 0.3, group)
        out["sub-group"] = t[1] - t[0]
    return out


@pytest.mark.parametrize("p", [3, 5])
def test_barrier_holds_every_rank_until_the_last_arrives(p: int) -> None:
    per_rank = launch(barrier_rank, p, backend="gloo", timeout_s=60)
    slack = per_rank[0]
    assert slack["ours"] >= 0 and slack["torch"] >= 0, slack
    assert per_rank[1]["sub-group"] >= 0, per_rank[1]
    # a barrier that does not wait lets the early ranks go about 0.3 s too soon:
    # the same check fails for it, so it can fail for ours
    assert slack["no-op"] < -0.2, slack


def bad_input_rank() -> dict:
    p, me = dist.get_world_size(), dist.get_rank()
    cases = {
        "broadcast src out of range": lambda: C.broadcast(torch.ones(2), src=p),
        "broadcast sizes differ": lambda: C.broadcast(torch.ones(2 + me), src=0),
        "reduce dst out of range": lambda: C.reduce(torch.ones(2), dst=-1),
        "reduce bad op": lambda: C.reduce(torch.ones(2), dst=0, op=ReduceOp.BAND),
        "scatter short list": lambda: C.scatter(
            torch.ones(2), [torch.ones(2)] if me == 0 else None, src=0
        ),
        "gather dst out of range": lambda: C.gather(torch.ones(2), None, dst=p + 3),
        "all_gather sizes differ": lambda: C.all_gather(
            [torch.ones(2 + me) for _ in range(p)], torch.ones(2 + me)
        ),
        "reduce_scatter bad dtype": lambda: C.reduce_scatter(
            torch.ones(2, dtype=torch.bool), [torch.ones(2, dtype=torch.bool)] * p
        ),
        "all_to_all mismatched pieces": lambda: C.all_to_all(
            [torch.ones(1) for _ in range(p)],
            [torch.ones(1 + (me == 0)) for _ in range(p)],
        ),
    }
    out = {}
    for name, call in cases.items():
        try:
            call()
            out[name] = "no error"
        except ValueError as exc:
            out[name] = str(exc)
    return out


@pytest.mark.parametrize("p", [3, 5])
def test_collectives_match_torch(p: int) -> None:
    assert not [
        f for r in launch(collectives_rank, p, backend="gloo", timeout_s=60) for f in r
    ]


@pytest.mark.slow
# Odd (5, 7) and power-of-two (2, 4) world sizes take every code path; 6 and 8 ranks
# on two cores cost most of a minute and add none.
@pytest.mark.parametrize("p", [1, 2, 4, 7])
def test_collectives_match_torch_more_world_sizes(p: int) -> None:
    assert not [
        f for r in launch(collectives_rank, p, backend="gloo", timeout_s=60) for f in r
    ]


def test_bad_input_raises_on_every_rank() -> None:
    per_rank = launch(bad_input_rank, 3, backend="gloo", timeout_s=20)
    for name in per_rank[0]:
        messages = [r[name] for r in per_rank]
        assert "no error" not in messages, (name, messages)


def test_main_runs_and_reports_every_collective() -> None:
    result = launch(C.main, 3, backend="gloo", timeout_s=60)[0]
    names = {row["collective"].split(",")[0] for row in result["tables"]["schedules"]}
    assert names == set(C.SCHEDULES)


@pytest.mark.gpu
@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs at least 2 CUDA GPUs")
def test_collectives_match_torch_on_nccl() -> None:
    p = min(torch.cuda.device_count(), 8)
    assert not [
        f for r in launch(collectives_rank, p, backend="nccl", timeout_s=120) for f in r
    ]
