"""All six hand-made all-reduces against dist.all_reduce: every op, dtype and awkward
size, on 1–8 ranks (3 and 5 always; the rest marked slow), one launch per world size.

Exact for integers, allclose for floats. Also: bad input raises on every rank (no
hang), sub-groups, non-contiguous and multi-dimensional tensors, AVG on integers
refused the way torch refuses it, and a bad --numel refused by the parser.
"""

from __future__ import annotations

import functools

import pytest
import torch
import torch.distributed as dist
from conftest import refused
from torch.distributed import ReduceOp

from snippets.comm.algorithms import allreduce, halving_doubling, naive_allreduce
from snippets.comm.algorithms import ring_allreduce as ring
from snippets.comm.algorithms import tree_allreduce as tree
from snippets.comm.algorithms.ring_allreduce import ring_allreduce
from snippets.comm.algorithms.tree_allreduce import (
    double_tree_allreduce,
    tree_allreduce,
)
from snippets.core.cli import snippet_options
from snippets.core.runtime import device, launch

OPS = {
    "SUM": ReduceOp.SUM,
    "PRODUCT": ReduceOp.PRODUCT,
    "MIN": ReduceOp.MIN,
    "MAX": ReduceOp.MAX,
    "AVG": ReduceOp.AVG,
}
DTYPES = (torch.float32, torch.float64, torch.int64)

# Every algorithm, plus variants that take other code paths (tiny segments make the
# pipelines run many segments per chunk).
VARIANTS = {
    **allreduce.ALGORITHMS,
    "ring, 24-byte segments": functools.partial(ring_allreduce, segment_bytes=24),
    "tree, 24-byte segments": functools.partial(tree_allreduce, segment_bytes=24),
    "double tree, 24-byte segments": functools.partial(
        double_tree_allreduce, segment_bytes=24
    ),
}


def _input(numel: int, dtype: torch.dtype, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    if dtype.is_floating_point:
        return torch.randn(numel, generator=g, dtype=dtype).to(device())
    return torch.randint(-3, 4, (numel,), generator=g, dtype=dtype).to(
        device()
    )  # small: products of 8 stay exact


def _same(ours: torch.Tensor, theirs: torch.Tensor) -> bool:
    if ours.dtype.is_floating_point:
        tol = 1e-5 if ours.dtype == torch.float32 else 1e-12
        return torch.allclose(ours, theirs, rtol=tol, atol=tol)
    return torch.equal(ours, theirs)


def sweep_rank() -> list[str]:
    """Every variant × op × dtype × size on this rank; returns what went wrong."""
    p, me = dist.get_world_size(), dist.get_rank()
    sizes = sorted({1, p + 1, 37})  # fewer elements than ranks, not divisible by p, odd
    failures = []
    for numel in sizes:
        for dtype in DTYPES:
            x = _input(numel, dtype, seed=1000 * me + numel)
            for op_name, op in OPS.items():
                if op == ReduceOp.AVG and not dtype.is_floating_point:
                    continue  # checked separately below
                theirs = x.clone()
                dist.all_reduce(theirs, op)
                for name, fn in VARIANTS.items():
                    ours = x.clone()
                    fn(ours, op)
                    if not _same(ours, theirs):
                        failures.append(
                            f"p={p} {name} {op_name} {dtype} n={numel}: "
                            f"{ours.tolist()} != {theirs.tolist()}"
                        )
    return failures


def extras_rank() -> list[str]:
    """Sub-groups, shapes, strides, and AVG on integers, for every algorithm."""
    p, me = dist.get_world_size(), dist.get_rank()
    failures = []
    evens = dist.new_group(
        [r for r in range(p) if r % 2 == 0]
    )  # every rank creates every group
    odds = dist.new_group([r for r in range(p) if r % 2 == 1]) if p > 1 else None
    mine = evens if me % 2 == 0 else odds
    for name, fn in VARIANTS.items():
        x = _input(7, torch.float64, seed=me)
        ours, theirs = x.clone(), x.clone()
        fn(ours, ReduceOp.SUM, group=mine)
        dist.all_reduce(theirs, group=mine)
        if not _same(ours, theirs):
            failures.append(
                f"{name} with group ranks {dist.get_process_group_ranks(mine)}"
            )
        m = _input(15, torch.int64, seed=me).view(3, 5)
        ours, theirs = (
            m.t(),
            m.t().clone(),
        )  # (5, 3), not contiguous: must be written back in place
        fn(ours, ReduceOp.MAX)
        dist.all_reduce(theirs, ReduceOp.MAX)
        if not torch.equal(m.t(), theirs):
            failures.append(f"{name} on a transposed (5, 3) view")
        for shape in ((0,), ()):  # empty, and a 0-dim scalar
            t = torch.full(shape, float(me + 1))
            fn(t)
            if not torch.equal(t, torch.full(shape, p * (p + 1) / 2)):
                failures.append(f"{name} on shape {shape}: {t}")
        try:
            fn(torch.ones(3, dtype=torch.int64), ReduceOp.AVG)
            failures.append(f"{name} accepted AVG on int64")
        except ValueError as exc:
            if "AVG" not in str(exc):
                failures.append(f"{name}: unclear error for AVG on int64: {exc}")
    try:
        dist.all_reduce(torch.ones(3, dtype=torch.int64), ReduceOp.AVG)
        failures.append("torch accepts AVG on int64 now: match it")
    except RuntimeError:
        pass
    return failures


def bad_input_rank(name: str, case: str) -> str:
    """Every rank must raise ValueError (and name the problem); returns the message."""
    fn = VARIANTS[name]
    me = dist.get_rank()
    if case == "sizes differ":
        t, op = torch.ones(5 + (me == 1)), ReduceOp.SUM
    elif case == "bad op on one rank":
        t, op = torch.ones(5), (ReduceOp.BAND if me == 1 else ReduceOp.SUM)
    else:  # "bad dtype"
        t, op = torch.ones(5, dtype=torch.complex64), ReduceOp.SUM
    try:
        fn(t, op)
    except ValueError as exc:
        return str(exc)
    return "no error"


def bad_input_all_rank() -> dict:
    return {
        (name, case): bad_input_rank(name, case)
        for name in allreduce.ALGORITHMS
        for case in ("sizes differ", "bad op on one rank", "bad dtype")
    }


def all_checks_rank(extras: bool, bad_input: bool) -> dict:
    """One launch does it all: spawning ranks costs more than the checks."""
    out = {"sweep": sweep_rank()}
    if extras:
        out["extras"] = extras_rank()
    if bad_input:
        out["bad_input"] = bad_input_all_rank()
        out["main"] = allreduce.main(1001)
    return out


@pytest.fixture(scope="module")
def on_3_ranks() -> list[dict]:
    return launch(all_checks_rank, 3, backend="gloo", timeout_s=60, args=(False, True))


@pytest.fixture(scope="module")
def on_5_ranks() -> list[dict]:
    return launch(all_checks_rank, 5, backend="gloo", timeout_s=60, args=(True, False))


def _failures(per_rank: list[dict], key: str) -> list[str]:
    return [f for r in per_rank for f in r[key]]


def test_every_algorithm_op_dtype_size_matches_torch_on_3_ranks(
    on_3_ranks: list[dict],
) -> None:
    assert not _failures(on_3_ranks, "sweep")


def test_every_algorithm_op_dtype_size_matches_torch_on_5_ranks(
    on_5_ranks: list[dict],
) -> None:
    assert not _failures(on_5_ranks, "sweep")


@pytest.mark.slow
# Odd (5, 7) and power-of-two (2, 4) world sizes take every code path; 6 and 8 ranks
# on two cores cost most of a minute and add none.
@pytest.mark.parametrize("p", [1, 2, 4, 7])
def test_every_algorithm_op_dtype_size_matches_torch_more_world_sizes(p: int) -> None:
    assert not _failures(
        launch(all_checks_rank, p, backend="gloo", timeout_s=60, args=(p > 1, False)),
        "sweep",
    )


def test_groups_shapes_and_avg_on_ints(on_5_ranks: list[dict]) -> None:
    assert not _failures(on_5_ranks, "extras")


def test_bad_input_raises_on_every_rank_without_hanging(on_3_ranks: list[dict]) -> None:
    per_rank = [r["bad_input"] for r in on_3_ranks]
    for key in per_rank[0]:
        messages = [r[key] for r in per_rank]
        assert "no error" not in messages, (key, messages)
    for r in per_rank:
        for (name, case), msg in r.items():
            expected = {
                "sizes differ": "differ",
                "bad op on one rank": "unsupported reduce op",
                "bad dtype": "unsupported dtype",
            }[case]
            assert expected in msg, (name, case, msg)


def test_public_names() -> None:
    for name in (
        "naive_allreduce",
        "ring_allreduce",
        "tree_allreduce",
        "double_tree_allreduce",
        "halving_doubling_allreduce",
        "Send",
    ):
        assert hasattr(allreduce, name)


def test_main_reports_every_algorithm(on_3_ranks: list[dict]) -> None:
    assert [
        row["algorithm"] for row in on_3_ranks[0]["main"]["tables"]["algorithms"]
    ] == list(allreduce.ALGORITHMS)


@pytest.mark.parametrize(
    "module", [allreduce, naive_allreduce, ring, tree, halving_doubling]
)
@pytest.mark.parametrize("bad", ["0", "-3", "1.5", "abc"])
def test_bad_numel_is_refused_by_the_parser(
    module: object, bad: str, capfd: pytest.CaptureFixture
) -> None:
    def parse(argv: list[str]) -> dict:
        return snippet_options(module, argv, "allreduce")

    assert "--numel" in refused(["--numel", bad], capfd, entry=parse)


@pytest.mark.gpu
@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs at least 2 CUDA GPUs")
def test_every_algorithm_matches_torch_on_nccl() -> None:
    p = min(torch.cuda.device_count(), 8)
    assert not _failures(
        launch(all_checks_rank, p, backend="nccl", timeout_s=120, args=(False, False)),
        "sweep",
    )
