"""One hop of the ring on two gloo ranks: each rank gets exactly the tensor its left
neighbour sent, two hops in flight at once stay apart by tag, and the sender's tensor
is left as it was."""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist

from snippets.attention.ring_pass import finish_pass, start_pass
from snippets.core.runtime import launch


def _made_by(r: int) -> torch.Tensor:
    return torch.full((3, 5), float(r)) + torch.arange(5.0)


def _hops() -> dict:
    r, p = dist.get_rank(), dist.get_world_size()
    left = (r - 1) % p
    mine, other = _made_by(r), torch.arange(8.0) * (r + 1)
    a = start_pass(mine, None, tag=1)
    b = start_pass(other, None, tag=2)  # a second hop in flight before the first ends
    got_b, got_a = finish_pass(b), finish_pass(a)
    res = {
        "a_ok": torch.equal(got_a, _made_by(left)),
        "b_ok": torch.equal(got_b, torch.arange(8.0) * (left + 1)),
        "sender_kept": torch.equal(mine, _made_by(r)),
        "fresh_buffer": got_a.data_ptr() != mine.data_ptr(),
    }
    strided = _made_by(r).T  # (5, 3), not contiguous: last, in case it fails
    try:
        res["strided_ok"] = torch.equal(
            finish_pass(start_pass(strided, None, tag=3)), _made_by(left).T
        )
    except RuntimeError as e:
        res["strided_ok"] = str(e)
    return res


@pytest.fixture(scope="module")
def results() -> list[dict]:
    return launch(_hops, 2, backend="gloo", timeout_s=30)


def test_each_rank_receives_its_left_neighbours_tensor(results) -> None:
    for rank, res in enumerate(results):
        assert res["a_ok"] and res["b_ok"], f"rank {rank}: {res}"
        assert res["sender_kept"] and res["fresh_buffer"], f"rank {rank}: {res}"


def test_a_non_contiguous_tensor_passes_too(results) -> None:
    assert all(res["strided_ok"] is True for res in results), results
