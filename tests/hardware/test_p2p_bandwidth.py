"""p2p_bandwidth: every ordered pair measured, payloads intact (checked against
broadcast), latency from the shared ping-pong, and bad input refused by the parser."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch.distributed as dist
from conftest import refused

from snippets.core import charts
from snippets.core.runtime import launch
from snippets.hardware.p2p_bandwidth import (
    device_copy_gbps,
    main,
    send_recv_seconds,
    where,
)

REPO = Path(__file__).resolve().parents[2]


def _ranks_check(numel: int) -> dict:
    rank, p = dist.get_rank(), dist.get_world_size()
    for src, dst in ((0, p - 1), (p - 1, 1)):
        torch.manual_seed(src * 100 + dst)
        sent = torch.randn(numel)  # [numel], the same on every rank (same seed)
        buf = sent.clone() if rank == src else torch.zeros(numel)
        seconds = send_recv_seconds(src, dst, buf, iters=3)
        oracle = buf.clone() if rank == src else torch.empty(numel)
        dist.broadcast(oracle, src)  # the built-in collective says what src had
        if rank == dst:
            assert torch.equal(buf, oracle), (
                "send/recv delivered something else than broadcast"
            )
        assert len(seconds) == 3 and min(seconds) > 0  # one time per send
    out = main(size_mib=numel * 4 / 2**20, iters=2)
    assert f"{p} gloo ranks" in " ".join(out["markdown"]["where"].split())
    return out


def test_every_pair_three_ranks_odd_length() -> None:
    outs = launch(_ranks_check, 3, backend="gloo", timeout_s=60, args=(1001,))
    rows = outs[0]["tables"]["pairs"]
    assert sorted((r["from"], r["to"]) for r in rows) == [
        (i, j) for i in range(3) for j in range(3) if i != j
    ]
    assert all(r["GB/s"] > 0 and r["latency (µs)"] > 0 for r in rows)
    for r in rows:  # the median lies inside its interquartile range
        lo, hi = (float(x) for x in r["GB/s IQR"].split("–"))
        assert lo <= float(f"{r['GB/s']:.3g}") <= hi or lo <= r["GB/s"] <= hi
        lo, hi = (float(x) for x in r["latency IQR (µs)"].split("–"))
        assert lo - 0.5 <= r["latency (µs)"] <= hi + 0.5
    assert abs(rows[0]["MiB"] - 1001 * 4 / 2**20) < 1e-9
    for fig in ("bandwidth", "latency"):
        spec = outs[0]["figures"][fig]
        charts.validate(spec)
        cells = spec["data"]["values"]
        assert len(cells) == 6 and spec["description"]  # every pair, no diagonal
        assert {c["value"] for c in cells} == {
            r["GB/s" if fig == "bandwidth" else "latency (µs)"] for r in rows
        }


def test_the_opening_box_says_what_ran_and_whether_copies_did() -> None:
    cpu = " ".join(where("gloo", 4, "a CPU", copies=False).split())
    gpu = " ".join(where("nccl", 8, "8× H100", copies=True).split())
    assert cpu.startswith('!!! info "What ran, and where" The run')
    assert "4 gloo ranks" in cpu and "loopback" in cpu and "no device copy ran" in cpu
    assert "8 GPUs (8× H100)" in gpu and "NCCL send/recv" in gpu
    assert "loopback" not in gpu and "no device copy" not in gpu
    assert "no device copy" not in where("gloo", 2, "a GPU box", copies=True)


@pytest.mark.parametrize(
    "argv,option",
    [
        (["--size-mib", "0"], "--size-mib"),
        (["--size-mib", "-1"], "--size-mib"),
        (["--size-mib", "nan"], "--size-mib"),
        (["--iters", "0"], "--iters"),
        (["--iters", "2.5"], "--iters"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(argv, option, capfd) -> None:
    line = refused(["run", "p2p_bandwidth", *argv], capfd, nothing_on_stdout=True)
    assert line.startswith("error:") and option in line


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_device_copy_on_gpus() -> None:
    gbps = device_copy_gbps(1 << 24, iters=2)
    n = torch.cuda.device_count()
    assert len(gbps) == n and all(len(r) == n and all(v > 0 for v in r) for r in gbps)
