"""Same model, different bits, against oracles worked out here: the ring's bits from a
left fold in its order, the fixed order's from functools.reduce, integer-valued data
on which every order agrees, one process's losses in fp64, and a bug that the budget
must expose. Odd world sizes and lengths catch chunk-boundary mistakes."""

from __future__ import annotations

import functools
import operator

import pytest
import torch
import torch.distributed as dist

from snippets.comm.algorithms.ring_allreduce import ring_allreduce
from snippets.comm.algorithms.tree_allreduce import tree_allreduce
from snippets.core.claims import LawBroken
from snippets.core.runtime import UsageError, launch
from snippets.faults import same_bits


def every_way(numel: int, dtype: torch.dtype) -> dict[str, torch.Tensor]:
    x = same_bits.rank_data(dist.get_rank(), numel, dtype)
    ways = {
        "ring": ring_allreduce,
        "tree": tree_allreduce,
        "dist": dist.all_reduce,
        "fixed": same_bits.fixed_order_allreduce,
        "fixed by ring": functools.partial(
            same_bits.fixed_order_allreduce, move=ring_allreduce
        ),
    }
    out = {}
    for name, way in ways.items():
        out[name] = x.clone()
        way(out[name])
    return out


def inputs(p: int, numel: int, dtype: torch.dtype) -> list[torch.Tensor]:
    return [same_bits.rank_data(r, numel, dtype) for r in range(p)]


@pytest.mark.parametrize("p, numel", [(3, 1001), (5, 7)])
def test_the_ring_is_its_own_order_and_a_fixed_order_is_one_process(
    p: int, numel: int
) -> None:
    got = launch(every_way, p, "gloo", timeout_s=60, args=(numel, torch.float32))
    xs = inputs(p, numel, torch.float32)
    # the ring adds chunk c starting at rank c: (x_c + x_{c+1}) + … round the ring
    edge = [c * (numel // p) + min(c, numel % p) for c in range(p + 1)]
    ring = torch.cat([
        functools.reduce(operator.add, [xs[(c + k) % p][edge[c]:edge[c + 1]]
                                        for k in range(p)])
        for c in range(p)
    ])  # fmt: skip
    left_fold = functools.reduce(operator.add, xs)  # ((x0 + x1) + x2) + …
    for rank_result in got:
        assert torch.equal(rank_result["ring"], ring)
        assert torch.equal(rank_result["fixed"], left_fold)
        assert torch.equal(rank_result["fixed by ring"], left_fold)
    if numel > 100:  # enough elements for some order to round differently
        assert not torch.equal(got[0]["ring"], got[0]["tree"])


def integer_valued(numel: int) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(dist.get_rank())
    x = torch.randint(-(2**20), 2**20, (numel,), generator=g).float()
    out = {}
    for name, way in (("ring", ring_allreduce), ("tree", tree_allreduce),
                      ("dist", dist.all_reduce)):  # fmt: skip
        out[name] = x.clone()
        way(out[name])
    return out


def test_on_integer_valued_fp32_every_algorithm_gives_the_same_bits() -> None:
    # |sums| < 4·2^20 < 2^24: every partial sum is exact, in any order
    got = launch(integer_valued, 4, "gloo", timeout_s=60, args=(999,))[0]
    assert torch.equal(got["ring"], got["tree"])
    assert torch.equal(got["ring"], got["dist"])


def test_the_error_bound_passes_a_correct_sum_and_fails_a_wrong_one() -> None:
    xs = inputs(4, 500, torch.float32)
    right = functools.reduce(operator.add, xs)
    assert same_bits.error_over_bound([right], xs) <= 1
    wrong = right.clone()  # one element ten bounds off: (p − 1)·u·Σ|x| = 3·2⁻²⁴·Σ|x|
    wrong[7] += 10 * 3 * 2**-24 * sum(abs(x[7].item()) for x in xs)
    assert same_bits.error_over_bound([wrong], xs) > 5


def fp64_and_bug(steps: int) -> dict[str, list[float]]:
    return {
        "dp2": same_bits.layout_losses(2, 1, 1, torch.float64, steps),
        "bug": same_bits.layout_losses(2, 1, 1, torch.float64, steps, sync=False),
    }


def test_in_fp64_dp2_is_one_process_and_a_missing_average_is_not() -> None:
    steps = 4
    control = same_bits.one_process_losses(torch.float64, steps)
    got = launch(fp64_and_bug, 2, "gloo", timeout_s=120, args=(steps,))[0]
    assert all(abs(a - b) < 1e-12 * abs(b) for a, b in zip(got["dp2"], control))
    assert got["bug"][0] == pytest.approx(control[0], rel=1e-12)  # before any step
    assert all(abs(a - b) > 1e-4 for a, b in zip(got["bug"][1:], control[1:]))


def test_pp2_in_fp64_is_one_process() -> None:
    steps = 3
    control = same_bits.one_process_losses(torch.float64, steps)
    got = launch(same_bits.layout_losses, 2, "gloo", timeout_s=120,
                 args=(1, 2, 1, torch.float64, steps))[0]  # fmt: skip
    assert all(abs(a - b) < 1e-12 * abs(b) for a, b in zip(got, control))


def rows(f64: float, f32: float, bf16: float, bug: float) -> list[dict]:
    """A run's gap rows: every layout at the dtype's gap, tp layouts at twice it, and
    each gap ten times what it was in the first ten steps."""
    out = []
    for d, g in {"float64": f64, "float32": f32, "bfloat16": bf16}.items():
        for layout in same_bits.LAYOUTS:
            top = g * (2 if "tp" in layout else 1)
            out.append({"dtype": d, "layout": layout, "max |gap|": top,
                        "first 10 steps": top / 10, "last 10 steps": top})  # fmt: skip
    return out + [{"dtype": "float32", "layout": same_bits.BUG, "max |gap|": bug}]


BITS = [{"dtype": "float32", "ring ≠ tree": 5, "ring ≠ dist": 4, "tree ≠ dist": 3,
         "ring ≠ ring again": 0, "ring ≠ its order": 0, "error / bound": 0.5,
         "fixed ≠ one process": 0}]  # fmt: skip


def test_the_sentences_follow_the_run_and_only_a_broken_law_fails_it() -> None:
    said = same_bits.claims(BITS, rows(1e-15, 1e-6, 1e-2, 0.3), 100, 1000)
    assert len(said) == 9 and "2.0e-15 in fp64" in said[3]
    assert "is 10 to 10 times" in said[8] and "grows with the steps" in said[8]
    short = same_bits.claims(BITS, rows(1e-15, 1e-6, 1e-2, 0.3), 20, 1000)
    assert short[8] == "20 steps are too few to say whether the budget grows."
    # observations: the other outcome is said, and the run goes on
    loose = same_bits.claims(BITS, rows(1e-9, 1e-6, 1e-2, 0.3), 100, 1000)
    assert "more than 1e-12" in loose[7]
    lost = same_bits.claims(BITS, rows(1e-15, 1e-6, 0.3, 0.3), 100, 1000)
    assert "cannot tell rounding from a bug" in lost[5]
    level = rows(1e-15, 1e-6, 1e-2, 0.3)
    for r in level:
        r["first 10 steps"] = r["last 10 steps"] / 0.92 if "last 10 steps" in r else 0
    said = same_bits.claims(BITS, level, 100, 1000)
    assert "did not grow with the steps" in said[8]
    # laws: a fixed order that differs from one process, a ring that does not repeat
    with pytest.raises(LawBroken, match="fixed order"):
        same_bits.claims([{**BITS[0], "fixed ≠ one process": 1}],
                         rows(1e-15, 1e-6, 1e-2, 0.3), 100, 1000)  # fmt: skip
    with pytest.raises(LawBroken, match="same bits when run again"):
        same_bits.claims([{**BITS[0], "ring ≠ ring again": 2}],
                         rows(1e-15, 1e-6, 1e-2, 0.3), 100, 1000)  # fmt: skip


def test_too_many_elements_is_refused_before_any_rank_starts() -> None:
    with pytest.raises(UsageError, match="at most 1,000,000"):
        same_bits.main(numel=2_000_000)
