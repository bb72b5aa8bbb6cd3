"""A sweep of our collectives against torch's built-in: buffers, check, time, record.

For every size and algorithm it first checks that ours gives exactly what torch's
built-in gives (integer-valued float32, so sums are exact), then times the two
alternately (``snippets.core.timing``; the CPU clock: every thread of the rank, so
gloo's own threads count). Bandwidths are nccl-tests' (doc/
PERFORMANCE.md): ``algbw = S / t`` with S the bytes of the whole buffer (for all_gather
the gathered output, for reduce_scatter the input before scattering), and busbw scales
it by 2(p-1)/p for all_reduce and (p-1)/p for the other two, so it is comparable
across rank counts. The all-reduce names are those of
``snippets.comm.algorithms.allreduce``; all_gather and reduce_scatter are
``snippets.comm.collective.collectives``' rings.
"""

from __future__ import annotations

import functools
import json
import time
from typing import Callable, Sequence

import torch
import torch.distributed as dist

from snippets.comm.algorithms import allreduce, tree_allreduce
from snippets.comm.collective import collectives
from snippets.comm.cost.cost_model import size_text
from snippets.core.claims import law
from snippets.core.measure import algbw, busbw
from snippets.core.runtime import device, print0
from snippets.core.timing import paired
from snippets.sizing import cost_formulas

COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter")


def algorithms(collective: str, handshake: bool = False) -> dict[str, Callable]:
    """Ours for each collective; same arguments as torch's function of the same name.
    ``handshake``: keep our all-reduces' input check across ranks (one extra round of
    tiny messages per call, which torch's built-in does not do); off, the algorithm
    alone is timed."""
    if collective == "all_reduce":
        return {
            name: functools.partial(fn, check=handshake)
            for name, fn in allreduce.ALGORITHMS.items()
        }
    return {"ring": getattr(collectives, collective)}


def segment_bytes(name: str) -> int | None:
    """The segment size our pipelined trees cut each tree's share into."""
    return tree_allreduce.SEGMENT_BYTES if name in cost_formulas.PIPELINED else None


# --8<-- [start:buffers]
def per_rank_numel(collective: str, size_bytes: int, p: int) -> int:
    """float32 elements each rank contributes. all_reduce: the whole buffer; all_gather
    and reduce_scatter: S is the gathered (resp. unscattered) total, each piece S/p."""
    return size_bytes // 4 if collective == "all_reduce" else size_bytes // (4 * p)


def make_call(
    collective: str, fn: Callable, numel: int, p: int, fill: torch.Tensor | None = None
) -> tuple[Callable[[], None], Callable[[], torch.Tensor]]:
    """A call of ``fn`` on fresh buffers (zeros, or ``fill``), and a way to read the
    result. Timing runs on zeros: a sum of zeros never overflows however often."""
    dev = device()
    whole = numel * (p if collective == "reduce_scatter" else 1)
    src = fill if fill is not None else torch.zeros(whole, device=dev)
    if collective == "all_reduce":
        buf = src.clone()  # (numel,)
        return (lambda: fn(buf)), (lambda: buf)
    if collective == "all_gather":
        out = [torch.empty(numel, device=dev) for _ in range(p)]  # p × (numel,)
        mine = src.clone()  # (numel,)
        return (lambda: fn(out, mine)), (lambda: torch.cat(out))
    pieces = [c.clone() for c in src.view(p, numel)]  # p × (numel,): j goes to rank j
    out = torch.empty(numel, device=dev)
    return (lambda: fn(out, pieces)), (lambda: out)


BUILTIN = {
    "all_reduce": dist.all_reduce,
    "all_gather": dist.all_gather,
    "reduce_scatter": dist.reduce_scatter,
}
# --8<-- [end:buffers]


# --8<-- [start:measure]
def check(collective: str, name: str, ours: Callable, numel: int, p: int) -> None:
    """Ours must equal the built-in exactly on integer-valued float32."""
    g = torch.Generator().manual_seed(1000 + dist.get_rank())
    whole = numel * (p if collective == "reduce_scatter" else 1)
    data = torch.randint(-64, 64, (whole,), generator=g)
    data = data.to(device=device(), dtype=torch.float32)  # (numel,) or (p·numel,)
    results = []
    for fn in (ours, BUILTIN[collective]):
        call, result = make_call(collective, fn, numel, p, fill=data)
        call()
        results.append(result())
    law(
        torch.equal(results[0], results[1]),
        f"{collective}: {name} disagrees with torch's built-in",
    )


def sweep(
    collective: str,
    sizes: Sequence[int],
    names: Sequence[str],
    iters: int,
    machines: dict[str, cost_formulas.Machine] | None = None,
    as_json: bool = False,
    handshake: bool = False,
) -> list[dict]:
    """Every rank runs this; rank 0 prints one line per (algorithm, size) as it goes.
    For each fitted machine in ``machines`` a record gets ``predicted_<name>_s``."""
    p, ours = dist.get_world_size(), algorithms(collective, handshake)
    records = []
    for size in sizes:
        numel = per_rank_numel(collective, size, p)
        nbytes = numel * 4 * (1 if collective == "all_reduce" else p)  # S
        for name in names:
            check(collective, name, ours[name], numel, p)
            call, _ = make_call(collective, ours[name], numel, p)
            builtin_call, _ = make_call(collective, BUILTIN[collective], numel, p)
            rec = {
                "collective": collective,
                "algorithm": name,
                "world_size": p,
                "size_bytes": nbytes,
                "backend": dist.get_backend(),
            }  # then the harness's record: times, ratio and speedup, every round
            rec |= paired(call, builtin_call, iters, cpu_clock=time.process_time)
            rec |= {
                "algbw": algbw(nbytes, rec["time_s"]),
                "busbw": busbw(nbytes, rec["time_s"], p, collective),
                "baseline_busbw": busbw(nbytes, rec["baseline_time_s"], p, collective),
            }  # speedup = the built-in's time ÷ ours = ours' busbw ÷ the built-in's
            for label, m in (machines or {}).items():
                rec[f"predicted_{label}_s"] = (
                    cost_formulas.predict(name, p, nbytes, m, segment_bytes(name))
                    if collective == "all_reduce"
                    else cost_formulas.COLLECTIVES[collective](p).time(nbytes, m)
                )
            records.append(rec)
            print0(json.dumps(rec) if as_json else format_row(rec))
    return records


# --8<-- [end:measure]


def ring_target(size: int, p: int, iters: int = 5) -> dict:
    """Our ring beside the built-in at one size on the first p ranks (others wait)."""
    sub = dist.new_group(list(range(p)))  # every rank must create it, members or not
    row: dict = {"ranks": p, "size": size_text(size)}
    if dist.get_rank() < p:
        ring = functools.partial(allreduce.ring_allreduce, group=sub, check=False)
        builtin = functools.partial(dist.all_reduce, group=sub)
        ours, _ = make_call("all_reduce", ring, size // 4, p)
        theirs, _ = make_call("all_reduce", builtin, size // 4, p)
        t = paired(ours, theirs, iters, group=sub, cpu_clock=time.process_time)
        row |= {
            "ring busbw (GB/s)": busbw(size, t["time_s"], p) / 1e9,
            "ring ÷ built-in": t["speedup"],  # in busbw: the built-in's time ÷ ours
            "IQR": f"{t['speedup_lo']:.2f}–{t['speedup_hi']:.2f}",
            "CPU per call, ring ÷ built-in": t["cpu_ratio"],
        }
    dist.barrier()
    dist.destroy_process_group(sub)
    return row


def handshake_cost(size: int, iters: int = 15) -> dict:
    """What our all-reduces' input check across ranks costs: the ring without, with."""
    p, ring = dist.get_world_size(), allreduce.ring_allreduce
    bare, _ = make_call(
        "all_reduce", functools.partial(ring, check=False), size // 4, p
    )
    checked, _ = make_call(
        "all_reduce", functools.partial(ring, check=True), size // 4, p
    )
    t = paired(checked, bare, iters, cpu_clock=time.process_time)
    return {
        "size": size_text(size),
        "ranks": p,
        "ring (ms)": t["baseline_time_s"] * 1e3,
        "ring + handshake (ms)": t["time_s"] * 1e3,
        "with ÷ without": t["ratio"],  # in time, round by round
        "IQR": f"{t['ratio_lo']:.2f}–{t['ratio_hi']:.2f}",
    }


HEADER = (
    f"{'collective':<14} {'size':>8} {'algorithm':<16} {'time':>12} {'busbw':>12}"
    " ours ÷ built-in [IQR]"
)


def format_row(r: dict) -> str:
    """One record in at most 88 columns, under ``HEADER``."""
    return (
        f"{r['collective']:<14} {size_text(r['size_bytes']):>8} {r['algorithm']:<16} "
        f"{r['time_s'] * 1e3:>9.3f} ms {r['busbw'] / 1e9:>7.3f} GB/s "
        f"{r['speedup']:>5.2f} [{r['speedup_lo']:.2f}–{r['speedup_hi']:.2f}]"
    )
