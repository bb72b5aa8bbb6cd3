"""Point-to-point: the three safe swaps deliver the peer's tensor, the deliberate
deadlock is caught by its short timeout (not a hang), and the hazard demo reports
what arrived."""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist
from conftest import refused

from snippets.comm import point_to_point
from snippets.core.cli import snippet_options
from snippets.core.runtime import launch


def swaps_rank() -> list[str]:
    p, me = dist.get_world_size(), dist.get_rank()
    failures = []
    for swap in (
        point_to_point.swap_by_parity,
        point_to_point.swap_nonblocking,
        point_to_point.swap_batched,
    ):
        peer = me ^ 1
        if peer >= p:
            continue
        mine = torch.randn(7, generator=torch.Generator().manual_seed(me))  # odd length
        theirs = torch.empty(7)
        swap(mine, theirs, peer)
        if not torch.equal(
            theirs, torch.randn(7, generator=torch.Generator().manual_seed(peer))
        ):
            failures.append(f"{swap.__name__}: rank {me} got the wrong tensor")
    return failures


def test_swaps_on_odd_world() -> None:
    assert not [
        f for r in launch(swaps_rank, 3, backend="gloo", timeout_s=30) for f in r
    ]


def test_main_deadlocks_and_recovers_quickly() -> None:
    result = launch(point_to_point.main, 2, backend="gloo", timeout_s=30, args=(2.0,))[
        0
    ]
    assert result["deadlocked"], (
        "gloo's blocking send is expected to wait for the receiver"
    )
    # quickly: each deadlock ends at its own 2 s timeout, not the group's 30 s
    assert all(1.5 < s < 10 for s in result["deadlock_seconds"]), result[
        "deadlock_seconds"
    ]
    # the hazard demo reports one of the two possible outcomes, never anything else
    assert result["write_before_wait_received"] in ([1.0] * 4, [2.0] * 4)


@pytest.mark.parametrize("bad", ["0", "-1", "nan", "soon"])
def test_bad_deadlock_timeout_is_refused_by_the_parser(
    bad: str, capfd: pytest.CaptureFixture
) -> None:
    def parse(argv: list[str]) -> dict:
        return snippet_options(point_to_point, argv, "point_to_point")

    assert "--deadlock-timeout" in refused(
        ["--deadlock-timeout", bad], capfd, entry=parse
    )
