"""The shared plumbing of the hand-made collectives: the splitter (chunk bounds and
segments), the one reduction (against torch's own elementwise ops), the op/dtype
check, the cross-rank agreement round, and the check against dist.all_reduce (which
must catch a wrong all-reduce)."""

from __future__ import annotations

import functools

import pytest
import torch
import torch.distributed as dist
from torch.distributed import ReduceOp

from snippets.comm import messages, plumbing
from snippets.comm.algorithms.ring_allreduce import ring_allreduce
from snippets.core.runtime import launch


@pytest.mark.parametrize("n", [0, 1, 2, 7, 100, 1001])
@pytest.mark.parametrize("parts", [1, 2, 3, 5, 8])
def test_bounds_cover_everything_nearly_evenly(n: int, parts: int) -> None:
    b = messages.bounds(n, parts, start=10)
    sizes = [b[i + 1] - b[i] for i in range(parts)]
    assert b[0] == 10 and b[-1] == 10 + n and sum(sizes) == n
    assert max(sizes) - min(sizes) <= 1 and sizes == sorted(sizes, reverse=True)


@pytest.mark.parametrize("lo, hi", [(0, 0), (3, 4), (5, 105), (0, 1001)])
@pytest.mark.parametrize("most", [1, 7, 100, 5000])
def test_segments_are_few_short_and_contiguous(lo: int, hi: int, most: int) -> None:
    segs = messages.segments(lo, hi, most)
    n = hi - lo
    assert len(segs) == -(-n // most)  # the fewest that fit: ⌈n / most⌉
    assert all(b - a <= most and b > a for a, b in segs)
    edges = [lo] + [b for _, b in segs]  # each starts where the one before stopped
    assert [a for a, _ in segs] == edges[:-1] and edges[-1] == hi


def test_sent_per_rank_adds_bytes_by_sender() -> None:
    trace = [messages.Send(0, 0, 1, 0, 4, 32), messages.Send(1, 0, 2, 4, 5, 8)]
    trace.append(messages.Send(1, 2, 0, 0, 1, 8))
    assert messages.sent_per_rank(trace, 3) == {0: 40, 1: 0, 2: 8}


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int64])
def test_combine_matches_torch(dtype: torch.dtype) -> None:
    g = torch.Generator().manual_seed(0)
    a, b = (torch.randint(-5, 6, (37,), generator=g).to(dtype) for _ in range(2))
    expected = {
        ReduceOp.SUM: a + b,
        ReduceOp.PRODUCT: a * b,
        ReduceOp.MIN: torch.min(a, b),
        ReduceOp.MAX: torch.max(a, b),
    }
    for op, want in expected.items():
        acc = a.clone()
        plumbing.combine_(acc, b, op)
        assert torch.equal(acc, want), op
    if dtype.is_floating_point:
        acc = a.clone()
        plumbing.combine_(acc, b, ReduceOp.AVG)
        plumbing.finish_(acc, ReduceOp.AVG, 2)
        assert torch.allclose(acc, (a + b) / 2)


def test_the_table_holds_every_op_torch_reduces_with_the_same_name() -> None:
    assert list(plumbing.REDUCE_OPS) == ["SUM", "PRODUCT", "MIN", "MAX", "AVG"]
    for name, r in plumbing.REDUCE_OPS.items():
        assert r.op == getattr(ReduceOp, name) and plumbing.op_name(r.op) == name
    with pytest.raises(ValueError, match="unsupported reduce op"):
        plumbing.combine_(torch.ones(1), torch.ones(1), ReduceOp.BAND)


def test_op_problem() -> None:
    assert plumbing.op_problem(torch.ones(1), ReduceOp.SUM) == ""
    assert "unsupported reduce op" in plumbing.op_problem(torch.ones(1), ReduceOp.BAND)
    assert "unsupported dtype" in plumbing.op_problem(
        torch.ones(1, dtype=torch.bool), ReduceOp.SUM
    )
    assert "AVG" in plumbing.op_problem(torch.ones(1, dtype=torch.int64), ReduceOp.AVG)


def _off_by_one_on_rank_1(
    tensor: torch.Tensor, op: ReduceOp = ReduceOp.SUM, group: None = None
) -> None:
    dist.all_reduce(tensor, op, group=group)
    if dist.get_rank() == 1:
        tensor.view(-1)[-1] += 1


def agree_and_check_rank() -> dict:
    me = dist.get_rank()
    seen = plumbing.agree([me, 10 * me], "", None)
    try:
        plumbing.agree([me], "my tensor is odd" if me == 2 else "", None)
        raised = ""
    except ValueError as exc:
        raised = str(exc)
    x = plumbing.rank_input(11)
    errors = {}
    for name, fn in (
        ("ring", functools.partial(ring_allreduce, segment_bytes=16)),
        ("off by one", _off_by_one_on_rank_1),
    ):
        try:
            errors[name] = plumbing.check_against_builtin(fn, x, ReduceOp.MAX)
        except AssertionError as exc:
            errors[name] = str(exc)
    ints = torch.arange(5) * (me + 1)
    errors["ints"] = plumbing.check_against_builtin(ring_allreduce, ints)
    return {"seen": seen, "raised": raised, "errors": errors}


def test_agree_shares_fields_and_problems_and_the_check_can_fail() -> None:
    per_rank = launch(agree_and_check_rank, 3, backend="gloo", timeout_s=30)
    for r in per_rank:
        assert r["seen"] == [[0, 0], [1, 10], [2, 20]]
        assert r["raised"] == "rank 2: my tensor is odd"
        assert r["errors"]["ring"] == 0.0 and r["errors"]["ints"] == 0.0
    assert per_rank[0]["errors"]["off by one"] == 0.0
    message = per_rank[1]["errors"]["off by one"]
    assert message.startswith("_off_by_one_on_rank_1, MAX, torch.float64"), message
    assert "max |ours − torch| = 1" in message


def test_algorithm_name_names_partials() -> None:
    fn = functools.partial(ring_allreduce, segment_bytes=8)
    assert plumbing.algorithm_name(fn) == "ring_allreduce(segment_bytes=8)"
