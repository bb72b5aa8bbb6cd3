"""Ring all-reduce: its trace against the theory (2(p−1) steps, always to the
right-hand neighbour, 2(p−1)/p · n per rank), with and without segmentation; and its
main() check."""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist
from conftest import refused

from snippets.comm.algorithms import ring_allreduce as R
from snippets.comm.messages import sent_per_rank
from snippets.core.runtime import launch

N = 1001  # elements; not divisible by 3, 5, 6, 7 or 8


def traces_rank(segment_bytes: int, lead: int | None = R.LEAD) -> list:
    x = torch.ones(N, dtype=torch.float64)
    trace: list = []
    R.ring_allreduce(x, segment_bytes=segment_bytes, trace=trace, lead=lead)
    assert torch.equal(
        x, torch.full((N,), float(dist.get_world_size()), dtype=torch.float64)
    )
    return trace


def check_rank() -> dict:
    return {
        "whole": traces_rank(1 << 20),
        "segmented": traces_rank(800),
        "unpaced": traces_rank(800, lead=None),
        "lockstep": traces_rank(800, lead=0),
        "main": R.main(2003),
    }


@pytest.fixture(scope="module", params=[3, 5])
def run(request: pytest.FixtureRequest) -> tuple[int, list[dict]]:
    return request.param, launch(
        check_rank, request.param, backend="gloo", timeout_s=60
    )


def test_two_p_minus_one_steps_to_the_right(run: tuple[int, list[dict]]) -> None:
    p, per_rank = run
    for key in ("whole", "segmented"):
        sends = [s for r in per_rank for s in r[key]]
        assert sorted({s.step for s in sends}) == list(range(2 * (p - 1)))
        assert all(s.dst == (s.src + 1) % p for s in sends)
        for step in range(2 * (p - 1)):  # every rank sends in every step
            assert {s.src for s in sends if s.step == step} == set(range(p))


def test_each_rank_sends_two_p_minus_one_over_p_of_the_data(
    run: tuple[int, list[dict]],
) -> None:
    p, per_rank = run
    for key in ("whole", "segmented"):
        sent = sent_per_rank([s for r in per_rank for s in r[key]], p)
        ideal = 2 * (p - 1) / p * N * 8
        assert all(abs(b - ideal) <= 2 * (p - 1) * 8 for b in sent.values()), (
            sent,
            ideal,
        )


def test_segmentation_splits_each_chunk(run: tuple[int, list[dict]]) -> None:
    p, per_rank = run
    whole = sum(len(r["whole"]) for r in per_rank)
    segmented = [s for r in per_rank for s in r["segmented"]]
    assert whole == p * 2 * (p - 1)  # one message per rank per step
    assert len(segmented) > whole and all(s.nbytes <= 800 for s in segmented)


def test_pacing_the_sends_changes_when_not_what(run: tuple[int, list[dict]]) -> None:
    # the same messages in the same order, however far sends may run ahead
    _, per_rank = run
    for r in per_rank:
        assert r["unpaced"] == r["segmented"] == r["lockstep"]


def test_main_checks_every_op(run: tuple[int, list[dict]]) -> None:
    _, per_rank = run
    assert [row["op"] for row in per_rank[0]["main"]["tables"]["ops"]] == [
        "SUM",
        "PRODUCT",
        "MIN",
        "MAX",
        "AVG",
    ]


def test_bad_numel_is_one_line_and_exit_2(capfd) -> None:
    args = ["run", "ring_allreduce", "-n", "2", "--numel", "0"]
    assert "--numel" in refused(args, capfd)


def test_a_negative_lead_is_refused_before_any_message() -> None:
    with pytest.raises(ValueError, match="lead"):
        R.ring_allreduce(torch.ones(4), lead=-1)
