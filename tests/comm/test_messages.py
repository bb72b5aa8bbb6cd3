"""The splitter against hand-worked cuts, trace rows by hand, and one 2-rank run of
send/recv/exchange whose received data and merged trace are checked by hand."""

from __future__ import annotations

import torch
import torch.distributed as dist

from snippets.comm import messages as M
from snippets.core.runtime import launch


def test_bounds_and_segments_by_hand() -> None:
    assert M.bounds(10, 3) == [0, 4, 7, 10]  # 10 = 4 + 3 + 3
    assert M.bounds(7, 3, start=5) == [5, 8, 10, 12]
    assert M.bounds(2, 4) == [0, 1, 2, 2, 2]  # more parts than elements
    assert M.segments(0, 10, 4) == [(0, 4), (4, 7), (7, 10)]  # ⌈10/4⌉ = 3
    assert M.segments(3, 9, 3) == [(3, 6), (6, 9)]
    assert M.segments(5, 5, 3) == [] and M.segments(6, 5, 3) == []


def test_trace_rows_by_hand() -> None:
    rows = M.trace_rows([M.Send(2, 1, 0, 3, 7, 16, "reduce-scatter")])
    assert rows == [
        {
            "step": 2,
            "phase": "reduce-scatter",
            "send": "1 → 0",
            "elements": "[3, 7)",
            "bytes": 16,
        }
    ]


def messages_rank() -> dict:
    me = dist.get_rank()
    other = 1 - me
    flat = torch.arange(7, dtype=torch.float64) + 10 * me
    trace: list = []
    into = torch.zeros(3 if me == 0 else 2, dtype=torch.float64)
    # rank 0 sends [1, 3) and gets [4, 7) of rank 1's; an empty range sends nothing
    lo, hi = (1, 3) if me == 0 else (4, 7)
    M.wait_all(M.exchange(flat, lo, hi, other, into, other, None, trace, 1, "x"))
    empty = M.send(flat, 5, 5, other, None, trace, step=2)
    none_back = M.recv(torch.empty(0), other, None)
    got = torch.zeros(1, dtype=torch.float64)
    works = [M.send(flat, 6, 7, other, None, trace, step=3, tag=7)]
    works.append(M.recv(got, other, None, tag=7))
    M.wait_all(works)
    return {
        "into": into.tolist(),
        "got": got.item(),
        "skipped": empty is None and none_back is None,
        "merged": M.gather_trace(trace),
    }


def test_messages_move_what_the_trace_says() -> None:
    r0, r1 = launch(messages_rank, 2, backend="gloo", timeout_s=30)
    assert r0["into"] == [14.0, 15.0, 16.0] and r1["into"] == [1.0, 2.0]
    assert (r0["got"], r1["got"]) == (16.0, 6.0)
    assert r0["skipped"] and r1["skipped"]
    assert (
        r0["merged"]
        == r1["merged"]
        == [
            M.Send(1, 0, 1, 1, 3, 16, "x"),
            M.Send(1, 1, 0, 4, 7, 24, "x"),
            M.Send(3, 0, 1, 6, 7, 8),
            M.Send(3, 1, 0, 6, 7, 8),
        ]
    )
    assert M.sent_per_rank(r0["merged"], 2) == {0: 24, 1: 32}
