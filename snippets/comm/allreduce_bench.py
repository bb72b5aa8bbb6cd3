"""Benchmark: our all-reduce algorithms (and all-gather, reduce-scatter) beside torch's own.

    python -m snippets bench allreduce [-n N] [--sizes 4K 1M 64M] [--iters I] [--json]
                                       [--collective all_reduce|all_gather|reduce_scatter]
                                       [--algorithms ring tree ...] [--backend gloo|nccl] [--handshake]
    torchrun --nproc-per-node 8 -m snippets bench allreduce --sizes 64M --json

For every size and algorithm it first checks that ours gives exactly what torch's built-in
gives (integer-valued float32, so sums are exact), then times the two *alternately*, one
call each per round, so a machine that gets busier mid-run slows both alike. It reports the
median time and nccl-tests' bandwidths (nccl-tests, doc/PERFORMANCE.md):

    algbw = S / t        S = bytes of the whole buffer (for all_gather: the gathered output,
                             for reduce_scatter: the input before scattering)
    busbw = algbw · 2(n-1)/n   for all_reduce;   algbw · (n-1)/n   for all_gather, reduce_scatter

busbw is comparable across rank counts: it is what each link carries. ``ratio`` is our busbw
divided by the built-in's from the same rounds. Each record also has the CPU seconds a rank
spent per call (``cpu_s``, ``builtin_cpu_s``): where ranks outnumber cores, wall time says
when the scheduler let a rank run, CPU time what the call cost. ``--json`` prints one
record per line. Our all-reduces are timed without their input check across ranks (torch's
built-in has none); ``--handshake`` keeps it.

As a snippet (``python -m snippets run allreduce_bench``), it runs a small sweep on 4 ranks,
fits α, β, γ on the same ranks (snippets.comm.cost_model) and plots measured against predicted.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import re
import statistics
import time
from typing import Callable, NamedTuple, Sequence

import torch
import torch.distributed as dist

from snippets.comm import allreduce, collectives, cost_model, tree_allreduce
from snippets.core.cli import OneLineParser, add_run_arguments, main_entry
from snippets.core.measure import algbw, busbw, time_it
from snippets.core.runtime import (
    Spec,
    choose_backend,
    device,
    launch,
    print0,
    under_torchrun,
)
from snippets.core.svg import line_chart

BENCH = "allreduce"
SPEC = Spec(
    summary="our all-reduce algorithms vs torch's built-in: time, algbw, busbw, and the α-β prediction",
    world_size=4,
    min_world_size=2,
)
COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter")
DEFAULT_SIZES = ["4K", "64K", "1M", "16M", "64M"]
# our algorithm's name → the snippets.comm.cost_model formula that predicts it
MODEL_OF = {
    "naive_root": "naive_reduce_broadcast",
    "naive_everyone": "naive_all_to_all",
    "ring": "ring",
    "tree": "tree",
    "double_tree": "double_tree",
    "halving_doubling": "halving_doubling",
}


def algorithms(collective: str, handshake: bool = False) -> dict[str, Callable]:
    """Ours for each collective; same arguments as torch's function of the same name.
    ``handshake``: keep our all-reduces' input check across ranks (one extra round of tiny
    messages per call, which torch's built-in does not do); off, the algorithm alone is timed."""
    if collective == "all_reduce":
        found = {
            "naive_root": allreduce.naive_allreduce,
            "naive_everyone": functools.partial(
                allreduce.naive_allreduce, variant="everyone"
            ),
            "ring": allreduce.ring_allreduce,
            "tree": allreduce.tree_allreduce,
            "double_tree": allreduce.double_tree_allreduce,
            "halving_doubling": allreduce.halving_doubling_allreduce,
        }
        return {
            name: functools.partial(fn, check=handshake) for name, fn in found.items()
        }
    return {"ring": getattr(collectives, collective)}


def segment_bytes(name: str) -> int | None:
    """The segment size our pipelined trees cut each tree's share into (for the prediction)."""
    return tree_allreduce.SEGMENT_BYTES if name in ("tree", "double_tree") else None


# --8<-- [start:buffers]
def per_rank_numel(collective: str, size_bytes: int, p: int) -> int:
    """float32 elements each rank contributes. all_reduce: the whole buffer; all_gather and
    reduce_scatter: S is the gathered (resp. unscattered) total, so each piece is S/p."""
    return size_bytes // 4 if collective == "all_reduce" else size_bytes // (4 * p)


def make_call(
    collective: str, fn: Callable, numel: int, p: int, fill: torch.Tensor | None = None
) -> tuple[Callable[[], None], Callable[[], torch.Tensor]]:
    """A call of ``fn`` on fresh buffers (zeros, or ``fill``), and a way to read the result.
    Timing runs on zeros: a sum of zeros never overflows however often it is repeated."""
    dev = device()
    src = (
        fill
        if fill is not None
        else torch.zeros(
            numel * (p if collective == "reduce_scatter" else 1), device=dev
        )
    )
    if collective == "all_reduce":
        buf = src.clone()  # (numel,)
        return (lambda: fn(buf)), (lambda: buf)
    if collective == "all_gather":
        out = [torch.empty(numel, device=dev) for _ in range(p)]  # p × (numel,)
        mine = src.clone()  # (numel,)
        return (lambda: fn(out, mine)), (lambda: torch.cat(out))
    pieces = [
        c.clone() for c in src.view(p, numel)
    ]  # p × (numel,): piece j is reduced onto rank j
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
    """Ours must equal the built-in exactly on integer-valued float32 (sums stay exact)."""
    g = torch.Generator().manual_seed(1000 + dist.get_rank())
    data = torch.randint(
        -64, 64, (numel * (p if collective == "reduce_scatter" else 1),), generator=g
    )
    data = data.to(device=device(), dtype=torch.float32)  # (numel,) or (p·numel,)
    results = []
    for fn in (ours, BUILTIN[collective]):
        call, result = make_call(collective, fn, numel, p, fill=data)
        call()
        results.append(result())
    assert torch.equal(results[0], results[1]), (
        f"{collective}: {name} disagrees with torch's built-in"
    )


class Paired(NamedTuple):
    time_s: float  # median wall-clock seconds of a call of ours
    builtin_time_s: float
    cpu_s: float  # CPU seconds a rank spends per call (all its threads), averaged over ranks
    builtin_cpu_s: float


def cpu_per_call(
    fn: Callable[[], None], iters: int, group: dist.ProcessGroup | None = None
) -> float:
    """CPU seconds this process (all its threads) spends per call, over back-to-back calls with
    no timer in between, averaged over the ranks."""
    dev = device()
    dist.barrier(group=group)
    start = time.process_time()
    for _ in range(iters):
        fn()
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)
    spent = torch.tensor(
        [(time.process_time() - start) / iters], dtype=torch.float64, device=dev
    )
    dist.all_reduce(spent, group=group)
    return spent.item() / dist.get_world_size(group)


def paired_times(
    ours: Callable[[], None],
    builtin: Callable[[], None],
    iters: int,
    group: dist.ProcessGroup | None = None,
) -> Paired:
    """Time ours and the built-in alternately, one call each per round, taking turns at going
    first; then the CPU time of each, in the order ours, built-in, built-in, ours, so that a
    machine getting busier or quieter during the run favours neither."""
    dev, fns, wall, cpu = device(), (ours, builtin), ([], []), [0.0, 0.0]
    ours(), builtin()  # warm-up: connections, allocations, caches
    for i in range(iters):
        for j in (0, 1) if i % 2 == 0 else (1, 0):
            wall[j].append(time_it(fns[j], warmup=0, iters=1, device=dev, group=group))
    half = max(1, iters // 2)
    for j in (0, 1, 1, 0):
        cpu[j] += cpu_per_call(fns[j], half, group) / 2
    return Paired(
        statistics.median(wall[0]), statistics.median(wall[1]), cpu[0], cpu[1]
    )


def sweep(
    collective: str,
    sizes: Sequence[int],
    names: Sequence[str],
    iters: int,
    machines: dict[str, cost_model.Machine] | None = None,
    as_json: bool = False,
    handshake: bool = False,
) -> list[dict]:
    """Every rank runs this; rank 0 prints one line per (algorithm, size) as it goes. For each
    fitted machine in ``machines`` a record gets ``predicted_<name>_s``, the α-β-γ time."""
    p, ours = dist.get_world_size(), algorithms(collective, handshake)
    records = []
    for size in sizes:
        numel = per_rank_numel(collective, size, p)
        nbytes = (
            numel * 4 * (1 if collective == "all_reduce" else p)
        )  # S as nccl-tests counts it
        for name in names:
            check(collective, name, ours[name], numel, p)
            call, _ = make_call(collective, ours[name], numel, p)
            builtin_call, _ = make_call(collective, BUILTIN[collective], numel, p)
            t, t_builtin, cpu, cpu_builtin = paired_times(call, builtin_call, iters)
            rec = {
                "collective": collective,
                "algorithm": name,
                "world_size": p,
                "size_bytes": nbytes,
                "time_s": t,
                "algbw": algbw(nbytes, t),
                "busbw": busbw(nbytes, t, p, collective),
                "builtin_time_s": t_builtin,
                "builtin_busbw": busbw(nbytes, t_builtin, p, collective),
                "ratio": t_builtin / t,
                "cpu_s": cpu,
                "builtin_cpu_s": cpu_builtin,
                "backend": dist.get_backend(),
            }
            for label, m in (machines or {}).items():
                rec[f"predicted_{label}_s"] = (
                    cost_model.predict(
                        MODEL_OF[name], p, nbytes, m, segment_bytes(name)
                    )
                    if collective == "all_reduce"
                    else cost_model.COLLECTIVES[collective](p).time(nbytes, m)
                )
            records.append(rec)
            print0(json.dumps(rec) if as_json else format_row(rec))
    return records


# --8<-- [end:measure]


def format_row(r: dict) -> str:
    return (
        f"{r['collective']:>14} {r['size_bytes']:>11} B {r['algorithm']:>16} {r['time_s'] * 1e3:>10.3f} ms "
        f"{r['algbw'] / 1e9:>8.3f} {r['busbw'] / 1e9:>8.3f} GB/s   built-in {r['builtin_busbw'] / 1e9:>8.3f} GB/s"
        f"   ours/built-in {r['ratio']:.2f} (CPU time {r['builtin_cpu_s'] / r['cpu_s']:.2f})"
    )


def parse_size(text: str) -> int:
    """'4096', '64K', '1M', '64MiB', '1G' → bytes (K = 1024, as nccl-tests counts)."""
    found = re.fullmatch(r"(\d+)\s*([KMG]?)(?:I?B)?", text.strip(), flags=re.I)
    if not found:
        raise argparse.ArgumentTypeError(
            f"size {text!r} is not a number of bytes like 4096, 64K, 1M or 1G"
        )
    value = int(found[1]) * 1024 ** " KMG".index(found[2].upper() or " ")
    if value < 4:
        raise argparse.ArgumentTypeError(
            f"size {text!r} is under one float32 (4 bytes)"
        )
    return value


def _run_bench(opts: argparse.Namespace) -> list[dict]:
    return sweep(
        opts.collective,
        opts.sizes,
        opts.algorithms,
        opts.iters,
        as_json=opts.json,
        handshake=opts.handshake,
    )


def bench(argv: list[str]) -> int:
    parser = OneLineParser(
        prog="python -m snippets bench allreduce", description=__doc__.split("\n\n")[0]
    )
    add_run_arguments(parser)
    parser.add_argument(
        "--sizes",
        nargs="+",
        type=parse_size,
        default=[parse_size(s) for s in DEFAULT_SIZES],
        metavar="SIZE",
        help=f"buffer sizes (default: {' '.join(DEFAULT_SIZES)})",
    )
    parser.add_argument("--collective", choices=COLLECTIVES, default="all_reduce")
    parser.add_argument(
        "--algorithms",
        nargs="+",
        metavar="NAME",
        help="a subset of ours (default: all)",
    )
    parser.add_argument(
        "--iters", type=int, default=5, help="timed rounds per size (default 5)"
    )
    parser.add_argument(
        "--json", action="store_true", help="one JSON record per (algorithm, size)"
    )
    parser.add_argument(
        "--handshake",
        action="store_true",
        help="time our all-reduces with their input check across ranks on (torch's has none)",
    )
    opts = parser.parse_args(argv)
    if opts.iters < 1:
        parser.error(f"--iters must be at least 1, got {opts.iters}")
    n = (
        int(os.environ["WORLD_SIZE"])
        if under_torchrun()
        else (4 if opts.nproc is None else opts.nproc)
    )
    if n < 2:
        parser.error(f"-n must be at least 2 (a collective needs company), got {n}")
    for size in opts.sizes:
        if per_rank_numel(opts.collective, size, n) == 0:
            parser.error(
                f"size {size} B is too small for {opts.collective} on {n} ranks: at least {4 * n} B"
            )
    known = list(algorithms(opts.collective))
    opts.algorithms = opts.algorithms or known
    if unknown := [a for a in opts.algorithms if a not in known]:
        parser.error(
            f"unknown algorithm {unknown[0]!r} for {opts.collective}: choose from {', '.join(known)}"
        )
    choose_backend(opts.backend, n)  # a bad --backend fails here, before any output
    if not opts.json and int(os.environ.get("RANK", "0")) == 0:
        print(
            f"{'collective':>14} {'size':>13} {'algorithm':>16} {'time':>13} {'algbw':>8} {'busbw':>8}",
            flush=True,
        )
    launch(_run_bench, n, opts.backend, opts.timeout or 120.0, args=(opts,))
    return 0


# --8<-- [start:main]
def ring_target(size: int, p: int, iters: int = 5) -> dict:
    """Our ring beside the built-in at one size on the first p ranks (the others wait)."""
    sub = dist.new_group(list(range(p)))  # every rank must create it, members or not
    row = {"ranks": p, "size": f"{size >> 20} MiB"}
    if dist.get_rank() < p:
        ring = functools.partial(allreduce.ring_allreduce, group=sub, check=False)
        ours, _ = make_call("all_reduce", ring, size // 4, p)
        theirs, _ = make_call(
            "all_reduce", functools.partial(dist.all_reduce, group=sub), size // 4, p
        )
        t, t_builtin, cpu, cpu_builtin = paired_times(ours, theirs, iters, group=sub)
        row |= {
            "ring busbw (GB/s)": busbw(size, t, p) / 1e9,
            "built-in busbw (GB/s)": busbw(size, t_builtin, p) / 1e9,
            "ring / built-in": t_builtin / t,
            "CPU per call: ring (ms)": cpu * 1e3,
            "CPU per call: built-in (ms)": cpu_builtin * 1e3,
        }
    dist.barrier()
    dist.destroy_process_group(sub)
    return row


def handshake_cost(size: int, iters: int = 15) -> dict:
    """What our all-reduces' input check across ranks costs: the ring with it and without."""
    p = dist.get_world_size()
    bare, _ = make_call(
        "all_reduce",
        functools.partial(allreduce.ring_allreduce, check=False),
        size // 4,
        p,
    )
    checked, _ = make_call(
        "all_reduce",
        functools.partial(allreduce.ring_allreduce, check=True),
        size // 4,
        p,
    )
    t, t_checked, cpu, cpu_checked = paired_times(bare, checked, iters)
    return {
        "size": f"{size >> 10} KiB",
        "ranks": p,
        "ring (ms)": t * 1e3,
        "ring + handshake (ms)": t_checked * 1e3,
        "CPU per call: ring (ms)": cpu * 1e3,
        "CPU per call: ring + handshake (ms)": cpu_checked * 1e3,
    }


def _label(r: dict) -> str:
    return r["algorithm"] if r["collective"] == "all_reduce" else r["collective"]


def _row(r: dict) -> dict:
    return {
        "size": f"{r['size_bytes'] >> 10} KiB",
        "algorithm": _label(r),
        "time (ms)": r["time_s"] * 1e3,
        "predicted, ping-pong fit (ms)": r["predicted_ping_pong_s"] * 1e3,
        "predicted, ring fit (ms)": r["predicted_ring_s"] * 1e3,
        "busbw (GB/s)": r["busbw"] / 1e9,
        "built-in busbw (GB/s)": r["builtin_busbw"] / 1e9,
        "ours / built-in": r["ratio"],
        "ours / built-in, CPU time": r["builtin_cpu_s"] / r["cpu_s"],
    }


def _best(records: list[dict], size: int) -> dict:
    at = [r for r in records if r["size_bytes"] == size]
    fastest = max(at, key=lambda r: r["ratio"])
    leanest = max(at, key=lambda r: r["builtin_cpu_s"] / r["cpu_s"])
    return {
        "size": f"{size >> 10} KiB",
        "fastest of ours": fastest["algorithm"],
        "its busbw / built-in's": fastest["ratio"],
        "least CPU of ours": leanest["algorithm"],
        "built-in's CPU / its": leanest["builtin_cpu_s"] / leanest["cpu_s"],
    }


SHORT = {
    "double_tree": "double tree",
    "halving_doubling": "halv-doubl",
    "all_reduce": "gloo",
    "all_gather": "AG",
    "reduce_scatter": "RS",
}  # legend labels that fit beside the plot


def _plot(records: list[dict], names: Sequence[str], title: str) -> str:
    """Measured time (solid) and the ring fit's prediction (dashed) per name, and the built-in."""
    series: dict[str, list] = {}
    for name in names:
        series[SHORT.get(name, name)] = [
            (r["size_bytes"], r["time_s"]) for r in records if _label(r) == name
        ]
    for collective in dict.fromkeys(
        r["collective"] for r in records
    ):  # one built-in line per collective
        first = next(
            _label(r)
            for r in records
            if r["collective"] == collective and _label(r) in names
        )
        label = "gloo" if collective == "all_reduce" else f"{SHORT[collective]} gloo"
        series[label] = [
            (r["size_bytes"], r["builtin_time_s"])
            for r in records
            if _label(r) == first
        ]
    dashed = [f"{SHORT.get(name, name)} model" for name in names]
    for name, label in zip(names, dashed):
        series[label] = [
            (r["size_bytes"], r["predicted_ring_s"])
            for r in records
            if _label(r) == name
        ]
    return line_chart(
        series,
        title=title,
        x_label="buffer size S (bytes)",
        y_label="seconds",
        log_x=True,
        log_y=True,
        dashed=dashed,
    )


def main(target_mib: int = 64) -> dict:
    p = dist.get_world_size()
    fit_sizes = [2**e for e in range(3, 24, 4)]  # 8 B … 8 MiB
    machines = {
        pattern: cost_model.measure_machine(fit_sizes, pattern=pattern)[0]
        for pattern in ("ping_pong", "ring")
    }
    for pattern, m in machines.items():
        print0(
            f"{pattern:>9}: α = {m.alpha * 1e6:.1f} µs, β = {m.beta * 1e9:.3f} ns/B, "
            f"γ = {m.gamma * 1e9:.3f} ns/B"
        )
    small, large, names = (
        [4 << 10, 64 << 10],
        [1 << 20, 4 << 20],
        list(algorithms("all_reduce")),
    )
    records = (
        sweep(
            "all_reduce", small, names, iters=15, machines=machines
        )  # small calls are cheap: more
        + sweep("all_reduce", large, names, iters=5, machines=machines)
    )  # rounds against the noise
    others = [
        r
        for c in ("all_gather", "reduce_scatter")
        for r in sweep(
            c, [64 << 10, 1 << 20, 4 << 20], ["ring"], iters=5, machines=machines
        )
    ]
    tables = {
        "sweep": [_row(r) for r in records],
        "best": [_best(records, s) for s in small + large],
        "target": [ring_target(target_mib << 20, q) for q in sorted({2, p})]
        if target_mib
        else [],
        "handshake": [handshake_cost(1 << 20)],
        "gather_scatter": [_row(r) for r in others],
    }
    for row in tables["best"] + tables["target"] + tables["handshake"]:
        print0(
            "  "
            + ", ".join(
                f"{k} {v:.2f}" if isinstance(v, float) else f"{k} {v}"
                for k, v in row.items()
            )
        )
    figures = {
        "sweep_plot": _plot(
            records,
            ("ring", "double_tree", "halving_doubling"),
            f"All-reduce on {p} ranks: measured (solid), α-β-γ model from the ring fit (dashed)",
        ),
        "gather_scatter_plot": _plot(
            others,
            ("all_gather", "reduce_scatter"),
            f"All-gather (AG) and reduce-scatter (RS) on {p} ranks, ours against gloo",
        ),
    }
    return {
        "records": records + others,
        "machines": {k: vars(m) for k, m in machines.items()},
        "tables": tables,
        "figures": figures,
    }


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--target-mib",
        type=int,
        default=64,
        help="size of the ring-vs-built-in check (0: skip)",
    )


# --8<-- [end:main]


if __name__ == "__main__":
    raise SystemExit(main_entry(main, SPEC))
