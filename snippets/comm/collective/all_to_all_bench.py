"""``python -m snippets bench all_to_all``: my all_to_all_single beside gloo's own.

    python -m snippets run all_to_all_bench          # 2 ranks: the note's run
    python -m snippets bench all_to_all [-n 4] [--mib 4 --mib 64] [--rounds 9] [--json]

Each rank sends ``mib`` MiB of fp32 in p equal blocks (the pattern nccl-tests'
alltoall_perf times). Mine runs twice, without and with the ranks' agreement on sizes
(gloo's own does no such check, so the target compares the first). They take turns
through the one timing harness (``snippets.core.timing``), who goes first alternating,
warm-up left out. Bandwidth as nccl-tests defines it for all-to-all: algbw = bytes a
rank sends and keeps ÷ time, and busbw = algbw · (p − 1)/p, since a rank's own block
never crosses a link. The target: my busbw at least 0.9× gloo's, judged on the IQR of
the per-round ratios (met only if the whole IQR lies above it).
"""

from __future__ import annotations

import json
import textwrap

import torch
import torch.distributed as dist

from snippets.comm.collective.all_to_all import all_to_all_single
from snippets.core.claims import FASTER, SLOWER, Spread, law, verdict
from snippets.core.cli import main_entry, positive_int
from snippets.core.runtime import Spec, device, print0
from snippets.core.timing import interleave, record

BENCH = "all_to_all"
SPEC = Spec(
    timed=True,  # it measures time: run-all runs it alone
    summary="all_to_all_single from send/recv vs gloo's: busbw and the 0.9× target",
    world_size=2,
)
TARGET = 0.9  # my busbw at least this share of the built-in's
SIZES_MIB = (4, 64)
ROUNDS = 9


# --8<-- [start:measure]
def measure(mib: int, rounds: int) -> dict:
    p = dist.get_world_size()
    numel = (mib << 20) // 4 // p * p  # fp32, p equal blocks
    x = torch.arange(numel, dtype=torch.float32, device=device())
    mine, theirs = torch.empty_like(x), torch.empty_like(x)
    all_to_all_single(mine, x)
    dist.all_to_all_single(theirs, x)
    law(torch.equal(mine, theirs), "all_to_all_single differs from gloo's")
    rounds_ = interleave(
        {"ours": lambda: all_to_all_single(mine, x, check=False),
         "checked": lambda: all_to_all_single(mine, x),
         "gloo": lambda: dist.all_to_all_single(theirs, x)},
        rounds,
    )  # fmt: skip
    r = record(rounds_, "ours", "gloo")  # the data movement alone, as gloo's
    checked = record(rounds_, "checked", "gloo")  # with the agreement on sizes
    factor = (p - 1) / p  # nccl-tests' bus factor for all-to-all
    size = numel * 4
    return r | {
        "mib": mib, "world_size": p, "bytes": size,
        "busbw": size / r["time_s"] * factor,
        "checked_busbw": size / checked["time_s"] * factor,
        "baseline_busbw": size / r["baseline_time_s"] * factor,
        "outcome": verdict(Spread(r["speedup"], r["speedup_lo"], r["speedup_hi"]),
                           TARGET),
    }  # fmt: skip


# --8<-- [end:measure]

OUTCOMES = {
    FASTER: "met (the whole IQR lies above it)",
    SLOWER: "missed (the whole IQR lies below it)",
}


def sentence(r: dict) -> str:
    ratio = Spread(r["speedup"], r["speedup_lo"], r["speedup_hi"])
    outcome = OUTCOMES.get(r["outcome"], "not settled (the IQR straddles it)")
    return (
        f"{r['mib']} MiB on {r['world_size']} ranks: busbw ours "
        f"{r['busbw'] / 1e9:.2f} GB/s ({r['checked_busbw'] / 1e9:.2f} with the size "
        f"check), gloo's {r['baseline_busbw'] / 1e9:.2f} GB/s; "
        f"ours ÷ gloo's {ratio.text()} (median [IQR] of {r['rounds']} paired rounds); "
        f"the {TARGET}× target: {outcome}."
    )


def add_arguments(parser) -> None:
    parser.add_argument(
        "--mib", type=positive_int, action="append", default=None,
        help="MiB a rank sends (repeatable; default 4 and 64)",
    )  # fmt: skip
    parser.add_argument("--rounds", type=positive_int, default=ROUNDS)
    parser.add_argument(
        "--json", dest="as_json", action="store_true", help="one JSON record a size"
    )


def main(mib: list | None = None, rounds: int = ROUNDS, as_json: bool = False) -> dict:
    records = [measure(m, rounds) for m in (mib or SIZES_MIB)]
    for r in records:
        said = textwrap.fill(sentence(r), 88, subsequent_indent="  ")
        print0(json.dumps(r) if as_json else said)
    rows = [
        {"MiB a rank": r["mib"], "ranks": r["world_size"],
         "ours GB/s": round(r["busbw"] / 1e9, 2),
         "checked GB/s": round(r["checked_busbw"] / 1e9, 2),
         "gloo's GB/s": round(r["baseline_busbw"] / 1e9, 2),
         "ours ÷ gloo's": Spread(r["speedup"], r["speedup_lo"], r["speedup_hi"]).text(),
         "target": r["outcome"]}
        for r in records
    ]  # fmt: skip
    return {"records": records, "tables": {"busbw": rows}}


if __name__ == "__main__":
    raise SystemExit(main_entry(main, SPEC))
