"""Point-to-point bandwidth and latency between every pair of ranks, and GPU copies.

For every ordered pair (i, j) the other ranks stand by while i sends a buffer to j:
bandwidth = bytes ÷ time of one send/recv (the slower of the two ranks counts, as in
nccl-tests); latency = half a ping-pong of one float32 (``snippets.comm.ping_pong``,
the same measurement the cost model fits α to). Under NCCL this is NCCL
send/recv between GPUs (NVLink or PCIe, whatever NCCL picked); under gloo it is TCP
through the loopback of one machine. Where CUDA is present, rank 0 also times a plain
device-to-device ``copy_`` between every pair of visible GPUs (and within each GPU).

    python -m snippets.hardware.p2p_bandwidth              # 4 ranks
    python -m snippets run p2p_bandwidth -n 3 --size-mib 16
"""

from __future__ import annotations

import argparse

import torch
import torch.distributed as dist

from snippets.comm.ping_pong import ping_pong_rounds
from snippets.core.charts import heatmap
from snippets.core.claims import Spread, law
from snippets.core.cli import main_entry, positive_float, positive_int
from snippets.core.measure import time_it, time_samples
from snippets.core.parts import Excerpt
from snippets.core.results import admonition
from snippets.core.runtime import Spec, describe_device, device, print0

SPEC = Spec(
    timed=True,  # it measures time: run-all runs it alone
    gpu_path=True,
    summary="point-to-point bandwidth and latency matrix between every pair of ranks",
    world_size=4,
    min_world_size=2,
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--size-mib",
        type=positive_float,
        default=None,
        help="message size in MiB (default 4 on CPU, 256 on GPUs)",
    )
    parser.add_argument(
        "--iters",
        type=positive_int,
        default=5,
        help="timed repetitions per pair (median kept)",
    )


# --8<-- [start:pair]
def send_recv_seconds(
    src: int, dst: int, buf: torch.Tensor, iters: int = 5
) -> list[float]:
    """Seconds for ``buf`` to go from rank src to rank dst, once per iteration. Every
    rank calls this."""
    rank = dist.get_rank()

    def once() -> None:
        if rank == src:
            dist.send(buf, dst)
        elif rank == dst:
            dist.recv(buf, src)

    # barrier before, slowest rank's time after
    return time_samples(once, 2, iters, buf.device)


def latency_seconds(src: int, dst: int, iters: int = 5) -> list[float]:
    """Half a round trip of one float32 (4 bytes), once per round: the latency of a
    tiny message."""
    return ping_pong_rounds([4], src, dst, iters=iters)[0]


# --8<-- [end:pair]


CPU = torch.device("cpu")


# --8<-- [start:copy]
def device_copy_gbps(
    nbytes: int, iters: int = 5, group: dist.ProcessGroup | None = None
) -> list[list[float]]:
    """GB/s of ``b.copy_(a)`` from cuda:i to cuda:j for every pair of visible GPUs.
    Off the diagonal the bytes cross NVLink or PCIe (peer to peer if the driver allows
    it, else through host memory); on it they stay in one GPU's memory (read once,
    written once). ``group``: the ranks that time it together (inside a process
    group, only rank 0's own)."""
    n = torch.cuda.device_count()
    return [[copy_gbps(i, j, nbytes, iters, group) for j in range(n)] for i in range(n)]


def copy_gbps(
    i: int, j: int, nbytes: int, iters: int, group: dist.ProcessGroup | None
) -> float:
    a = torch.ones(nbytes, dtype=torch.uint8, device=f"cuda:{i}")  # [nbytes]
    b = torch.empty(nbytes, dtype=torch.uint8, device=f"cuda:{j}")  # [nbytes]

    def once() -> None:
        b.copy_(a)
        torch.cuda.synchronize(i)
        torch.cuda.synchronize(j)

    # once() waits for both GPUs itself; the times meet over gloo, on the CPU
    seconds = time_it(once, warmup=2, iters=iters, device=CPU, group=group)
    law(bool((b == 1).all()), f"copy cuda:{i} → cuda:{j} lost bytes")
    return nbytes / seconds / 1e9


# --8<-- [end:copy]


def where(backend: str, p: int, on: str, copies: bool) -> str:
    """The page's opening box, from this run: what ran, on what (``on``), and whether
    any device copy did."""
    if backend == "nccl":
        text = f"The run on this page is {p} GPUs ({on}), NCCL send/recv between them."
    else:
        text = (
            f"The run on this page is {p} {backend} ranks on {on}, talking over the "
            "loopback interface: it shows the code works and says nothing about GPUs. "
            "Every pair goes through the same loopback device, so whatever spread "
            "between pairs it shows is the scheduler's, not topology."
        )
    if not copies:
        text += " There was no GPU, so no device copy ran: the copy table says so."
    return admonition("info", "What ran, and where", text)


def main(size_mib: float | None = None, iters: int = 5) -> dict:
    rank, p, dev = dist.get_rank(), dist.get_world_size(), device()
    transport = (
        "NCCL send/recv"
        if dist.get_backend() == "nccl"
        else f"{dist.get_backend()} send/recv"
    )
    mib = size_mib if size_mib is not None else (256.0 if dev.type == "cuda" else 4.0)
    numel = max(1, int(mib * 2**20) // 4)
    buf = torch.empty(numel, dtype=torch.float32, device=dev)  # [numel]
    bw = [[None] * p for _ in range(p)]
    lat = [[None] * p for _ in range(p)]
    rows = []
    for src in range(p):
        for dst in range(p):
            if src == dst:
                continue
            pattern = torch.arange(numel, dtype=torch.float32, device=dev) + (
                src * p + dst
            )  # [numel]
            if rank == src:
                buf.copy_(pattern)
            seconds = Spread.of(send_recv_seconds(src, dst, buf, iters))
            if rank == dst:  # the payload must arrive intact, or the time means nothing
                law(
                    torch.equal(buf, pattern),
                    f"rank {dst} received corrupted data from rank {src}",
                )
            gbps = [numel * 4 / s / 1e9 for s in seconds]  # a slower send: fewer GB/s
            us = Spread.of([t * 1e6 for t in latency_seconds(src, dst, iters)])
            bw[src][dst], lat[src][dst] = gbps[0], us.median
            rows.append(
                {
                    "from": src,
                    "to": dst,
                    "transport": transport,
                    "MiB": numel * 4 / 2**20,
                    "GB/s": bw[src][dst],
                    "GB/s IQR": f"{gbps[2]:.3g}–{gbps[1]:.3g}",
                    "latency (µs)": lat[src][dst],
                    "latency IQR (µs)": f"{us.lo:.0f}–{us.hi:.0f}",
                }
            )
    law(
        all(
            bw[i][j] > 0 and lat[i][j] > 0 for i in range(p) for j in range(p) if i != j
        ),
        "every pair measured a positive bandwidth and latency",
    )

    copies = [{"from": "-", "to": "-", "GB/s": "no CUDA device on this machine"}]
    if torch.cuda.is_available():
        alone = dist.new_group(
            [0], backend="gloo"
        )  # every rank takes part in creating it; rank 0 times alone
        gbps = device_copy_gbps(numel * 4, iters, alone) if rank == 0 else []
        dist.barrier()
        copies = [
            {"from": f"cuda:{i}", "to": f"cuda:{j}", "GB/s": g}
            for i, r in enumerate(gbps)
            for j, g in enumerate(r)
        ]
    labels = [f"rank {r}" for r in range(p)]
    mib = numel * 4 / 2**20
    said = Excerpt()  # what the note shows: the run, the range over pairs, the check
    said(f"{p} ranks, {transport}, {mib:g} MiB messages, median of {iters}:")
    print0("  GB/s      " + " ".join(f"{'→' + str(j):>8}" for j in range(p)))
    for i in range(p):
        print0(
            f"  rank {i}:  "
            + " ".join(f"{'-' if v is None else f'{v:.3g}':>8}" for v in bw[i])
        )
    print0("  latency µs" + " ".join(f"{'→' + str(j):>8}" for j in range(p)))
    for i in range(p):
        print0(
            f"  rank {i}:  "
            + " ".join(f"{'-' if v is None else f'{v:.0f}':>8}" for v in lat[i])
        )
    for c in copies if torch.cuda.is_available() else []:
        print0(f"  copy_ {c['from']} → {c['to']}: {c['GB/s']:.1f} GB/s")
    pairs = [(bw[i][j], lat[i][j]) for i in range(p) for j in range(p) if i != j]
    said(
        f"across pairs: {min(b for b, _ in pairs):.3g}–{max(b for b, _ in pairs):.3g}"
        f" GB/s, {min(t for _, t in pairs):.0f}–{max(t for _, t in pairs):.0f} µs"
    )
    said("every payload arrived intact ✓")
    backend = dist.get_backend()
    return {
        "markdown": {
            "where": where(
                backend, p, describe_device(backend), torch.cuda.is_available()
            )
        },
        "tables": {"pairs": rows, "device_copy": copies},
        "excerpts": {"summary": said.lines},
        "figures": {
            "bandwidth": heatmap(
                bw,
                labels,
                title=f"{transport} bandwidth, {numel * 4 / 2**20:g} MiB messages",
                unit="GB/s",
                row_title="sender",
                col_title="receiver",
                description=f"Bandwidth of one {numel * 4 / 2**20:g} MiB message from "
                f"each of {p} ranks (rows) to each other rank (columns), {transport}.",
            ),
            "latency": heatmap(
                lat,
                labels,
                title=f"{transport} latency, half a ping-pong of 4 bytes",
                unit="µs",
                row_title="sender",
                col_title="receiver",
                description=f"Half the round trip of a 4-byte message between each "
                f"ordered pair of {p} ranks, {transport}.",
            ),
        },
    }


if __name__ == "__main__":
    raise SystemExit(main_entry(main, SPEC))
