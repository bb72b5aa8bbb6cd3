"""p2p_bandwidth: every ordered pair measured, payloads intact (checked against broadcast)."""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist

from snippets.core.runtime import launch
from snippets.hardware.p2p_bandwidth import device_copy_gbps, main, send_recv_seconds


def _ranks_check(numel: int) -> dict:
    rank, p = dist.get_rank(), dist.get_world_size()
    for src, dst in ((0, p - 1), (p - 1, 1)):
        torch.manual_seed(src * 100 + dst)
        sent = torch.randn(numel)  # [numel], the same on every rank (same seed)
        buf = sent.clone() if rank == src else torch.zeros(numel)
        seconds = send_recv_seconds(src, dst, buf, iters=2)
        oracle = buf.clone() if rank == src else torch.empty(numel)
        dist.broadcast(oracle, src)  # the built-in collective says what src had
        if rank == dst:
            assert torch.equal(buf, oracle), (
                "send/recv delivered something else than broadcast"
            )
        assert seconds > 0
    out = main(size_mib=numel * 4 / 2**20, iters=2)
    return out


def test_every_pair_three_ranks_odd_length() -> None:
    outs = launch(_ranks_check, 3, backend="gloo", timeout_s=60, args=(1001,))
    rows = outs[0]["tables"]["pairs"]
    assert sorted((r["from"], r["to"]) for r in rows) == [
        (i, j) for i in range(3) for j in range(3) if i != j
    ]
    assert all(r["GB/s"] > 0 and r["latency (µs)"] > 0 for r in rows)
    assert abs(rows[0]["MiB"] - 1001 * 4 / 2**20) < 1e-9
    for fig in ("bandwidth", "latency"):
        assert (
            outs[0]["figures"][fig].startswith("<svg")
            and outs[0]["figures"][fig].count("<rect") >= 9
        )


def test_bad_size() -> None:
    with pytest.raises(Exception, match="size-mib"):
        launch(main, 2, backend="gloo", timeout_s=30, args=(-1.0,))


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_device_copy_on_gpus() -> None:
    gbps = device_copy_gbps(1 << 24, iters=2)
    n = torch.cuda.device_count()
    assert len(gbps) == n and all(len(r) == n and all(v > 0 for v in r) for r in gbps)
