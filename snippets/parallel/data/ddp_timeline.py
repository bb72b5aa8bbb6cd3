"""One DDP step as it ran: when each bucket's last gradient was ready, when its
all-reduce started and ended, per rank, and how much of the communication the
backward pass hid.

``DDP`` stamps every synced backward into ``ddp.timeline`` (``time.perf_counter_ns``:
ready, start, end per bucket). Each rank measures against its own backward start, so
the clocks of different machines never need to agree. A bucket's compute span runs
from the previous bucket's ready time (or backward's start) to its own; the hidden
fraction is the part of all-reduce time that falls inside backward's compute,
Σ|comm ∩ compute| / Σ|comm|. ``--trace FILE`` writes Chrome trace JSON
(:mod:`snippets.core.traces`: one process per rank), which Perfetto opens.

    python -m snippets run ddp_timeline --trace ddp.trace.json
"""

from __future__ import annotations

import argparse
import time

import torch
import torch.distributed as dist

from snippets.core.charts import timeline_chart
from snippets.core.claims import law
from snippets.core.cli import main_entry, positive_float, positive_int
from snippets.core.runtime import Spec, print0
from snippets.core.traces import chrome_trace, write_chrome_trace
from snippets.models.tiny_gpt import GPT, GPTConfig, random_batch
from snippets.parallel.data.ddp import DDP

SPEC = Spec(
    timed=True,  # it measures time: run-all runs it alone
    summary="one DDP step's buckets as they ran, and the share hidden",
    world_size=2,
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--bucket-cap-mb", type=positive_float, default=0.25)
    parser.add_argument("--steps", type=positive_int, default=2)
    parser.add_argument("--trace", default=None, metavar="FILE")


# --8<-- [start:spans]
def spans(timeline: list[dict], t0: int) -> list[dict]:
    """Per bucket, µs after backward started: compute (from the previous bucket's
    ready time), the wait before launch, and the all-reduce."""
    rows, previous = [], t0
    for e in sorted(timeline, key=lambda e: e["ready"]):
        us = {k: (e[k] - t0) / 1e3 for k in ("ready", "start", "end")}
        rows.append(
            {"bucket": e["bucket"], "compute_from": (previous - t0) / 1e3, **us}
        )
        previous = e["ready"]
    return rows


def hidden_fraction(rows: list[dict]) -> float:
    """Σ|[start, end] ∩ [0, last ready]| / Σ|[start, end]|."""
    compute_end = max(r["ready"] for r in rows)
    total = sum(r["end"] - r["start"] for r in rows)
    hidden = sum(max(0.0, min(r["end"], compute_end) - r["start"]) for r in rows)
    return hidden / total if total > 0 else 0.0


def bucket_trace(per_rank: list[list[dict]]) -> dict:
    """The rows as Chrome trace JSON, two threads per rank: backward, all-reduce."""
    spans: list[list[dict]] = []
    for rows in per_rank:
        spans.append([])
        for r in rows:
            b = f"bucket {r['bucket']}"
            spans[-1] += [
                {"name": f"backward → {b}", "tid": 0,
                 "ts": r["compute_from"], "dur": r["ready"] - r["compute_from"]},
                {"name": f"all-reduce {b}", "tid": 1,
                 "ts": r["start"], "dur": r["end"] - r["start"]},
            ]  # fmt: skip
    return chrome_trace(spans, ("backward", "all-reduce"))


# --8<-- [end:spans]


def overlap_chart(table: list[dict]) -> dict:
    """Per rank, a lane of backward compute per bucket and a lane of its all-reduce."""
    spans = [
        {"lane": f"rank {r['rank']} {kind}", "kind": kind, "label": f"bucket "
         f"{r['bucket']}", "start": r[a] / 1e3, "end": r[b] / 1e3}
        for r in table
        for kind, a, b in (("backward", "compute_from", "ready"),
                           ("all-reduce", "start", "end"))
    ]  # fmt: skip
    return timeline_chart(
        spans, title="One DDP step: buckets' backward and all-reduce",
        x_label="time after backward started", x_unit="ms",
        kinds=["backward", "all-reduce"],
        description="Per rank, when each bucket's gradients were computed and when "
        "its all-reduce ran, as stamped.",
    )  # fmt: skip


def main(bucket_cap_mb: float = 0.25, steps: int = 2, trace: str | None = None) -> dict:
    """Train a few steps; keep the last step's stamps (the first ones warm up)."""
    p, rank = dist.get_world_size(), dist.get_rank()
    cfg = GPTConfig(vocab_size=256, block_size=64, n_layer=4, n_head=4, n_embd=64)
    model = DDP(GPT(cfg, seed=0), bucket_cap_mb=bucket_cap_mb)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for idx, targets in random_batch(cfg, 4 * p, steps=steps):
        _, loss = model(idx.tensor_split(p)[rank], targets.tensor_split(p)[rank])
        dist.barrier()  # every rank starts backward together
        t0 = time.perf_counter_ns()
        loss.backward()
        opt.step()
        opt.zero_grad()
    mine = spans(model.timeline, t0)
    law(
        len(mine) == len(model.buckets) and all(r["end"] >= r["start"] for r in mine),
        "one record per bucket, each ending after it starts",
    )
    per_rank: list = [None] * p
    dist.all_gather_object(per_rank, mine)
    hidden = [hidden_fraction(rows) for rows in per_rank]
    if trace and rank == 0:
        write_chrome_trace(trace, bucket_trace(per_rank))
    print0(f"{p} ranks, {len(model.buckets)} buckets, last of {steps} steps (µs)")
    print0("rank bucket  compute from → ready   launch   all-reduce end")
    table = []
    for r_rank, rows in enumerate(per_rank):
        for r in rows:
            table.append({"rank": r_rank, **{k: round(v, 1) for k, v in r.items()}})
            print0(
                f"{r_rank:>4} {r['bucket']:>6} {r['compute_from']:>10.0f} → "
                f"{r['ready']:>7.0f} {r['start']:>8.0f} {r['end']:>14.0f}"
            )
    for r_rank, h in enumerate(hidden):
        print0(f"rank {r_rank}: {100 * h:.0f}% of all-reduce time inside backward")
    return {
        "tables": {"timeline": table},
        "figures": {"overlap": overlap_chart(table)},
        "hidden_fraction": hidden,
        "chrome_trace": bucket_trace(per_rank),
        "provenance": {"backend": dist.get_backend(), "world_size": p},
    }


if __name__ == "__main__":
    raise SystemExit(main_entry(main, SPEC))
