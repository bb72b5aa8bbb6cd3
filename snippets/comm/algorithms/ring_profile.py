"""Where our ring all-reduce's time goes, beside gloo's own, at one large size.

The target of the benchmark: our ring at 64 MiB on 2 ranks reaches at least 0.9× the
bus bandwidth of gloo's ``all_reduce``. Wall time on a shared, small machine swings by
tens of percent from run to run, so beside the paired wall-time ratio this records,
for each of the two, what a rank spends per call that the load barely moves: the CPU
seconds of each of its threads (Linux's per-thread clocks) and its voluntary context
switches (one per sleep: how often a thread hands off and waits to be woken).

The threads of a rank. Our ring runs in the Python thread: it posts ``isend``/``irecv``,
waits and adds. gloo's all-reduce runs in the process group's worker thread
(``pt_gloo_runloop``), the same ring in C++. Both move their bytes through gloo's TCP
transport, whose one event-loop thread per rank (``gloo_tcp_loop``) reads every message
from the loopback socket and finishes every write that the posting thread could not
finish at once. The reduce-scatter's additions are also timed alone, in the Python
thread, on the same segments.

    python -m snippets run ring_profile            # 2 ranks, 64 MiB
    python -m snippets run ring_profile --mib 16 --rounds 5
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import textwrap
import threading
import time
from typing import Callable

import torch
import torch.distributed as dist
from torch.distributed import ReduceOp

from snippets.comm.algorithms.allreduce_claims import TARGET, target_outcome
from snippets.comm.algorithms.ring_allreduce import SEGMENT_BYTES, ring_allreduce
from snippets.comm.collective.collective_sweep import check, make_call
from snippets.comm.messages import bounds, segments
from snippets.comm.plumbing import combine_
from snippets.core.claims import Spread, verdict
from snippets.core.cli import main_entry, positive_int
from snippets.core.measure import busy_core
from snippets.core.runtime import Spec, print0
from snippets.core.timing import paired, spread

SPEC = Spec(
    timed=True,  # it measures time: run-all runs it alone
    summary="where our ring's time goes beside gloo's: CPU per call, thread by thread",
    world_size=2,
    min_world_size=2,
)


TASKS = "/proc/self/task"  # Linux's account of each thread; other kernels keep none
NO_CLOCKS = (
    f"This machine has no {TASKS}, so each thread's CPU time and context switches "
    "were not measured: the table gives the wall time per call alone."
)


# --8<-- [start:clocks]
def thread_clocks() -> dict[str, list[float]]:
    """[CPU seconds, voluntary context switches] so far, summed over the threads of
    this process by name; the calling thread is "python (main)". Empty where there is
    no /proc/self/task (not Linux)."""
    main, out, task = threading.get_native_id(), {}, TASKS
    for tid in os.listdir(task) if os.path.isdir(task) else []:
        try:
            with open(f"{task}/{tid}/comm") as f:
                name = "python (main)" if int(tid) == main else f.read().strip()
            with open(f"{task}/{tid}/status") as f:
                switches = next(
                    int(line.split()[1])
                    for line in f
                    if line.startswith("voluntary_ctxt_switches")
                )
            # Linux's CPU clock of thread tid: MAKE_THREAD_CPUCLOCK(tid, CPUCLOCK_SCHED)
            cpu = time.clock_gettime(((~int(tid)) << 3) | 6)
        except (OSError, StopIteration):  # the thread ended while we looked
            continue
        total = out.setdefault(name, [0.0, 0.0])
        total[0], total[1] = total[0] + cpu, total[1] + switches
    return out


def per_call(fn: Callable[[], None], iters: int) -> dict[str, list[float]]:
    """What ``iters`` back-to-back calls cost per call: [CPU s, switches] by thread,
    and "wall" (seconds, twice), averaged over the ranks."""
    dist.barrier()
    before, start = thread_clocks(), time.perf_counter()
    for _ in range(iters):
        fn()
    wall, after = time.perf_counter() - start, thread_clocks()
    mine = {
        name: [(a - b) / iters for a, b in zip(now, before.get(name, [0.0, 0.0]))]
        for name, now in after.items()
    }
    mine["wall"] = [wall / iters] * 2
    everyone: list = [None] * dist.get_world_size()
    dist.all_gather_object(everyone, mine)
    names = {name for rank in everyone for name in rank}
    return {
        n: [statistics.mean(r.get(n, [0.0, 0.0])[i] for r in everyone) for i in (0, 1)]
        for n in names
    }


# --8<-- [end:clocks]


def addition_cpu(numel: int, p: int, iters: int = 3) -> float:
    """CPU seconds of one call's reduce-scatter additions alone, on this thread: the
    p−1 chunks of n/p elements, added segment by segment from a landing buffer."""
    seg = SEGMENT_BYTES // 4  # float32 elements per segment
    flat, landing = torch.zeros(numel), torch.zeros(seg)  # (n,), (segment,)
    edge = bounds(numel, p)
    pieces = [ab for c in range(p - 1) for ab in segments(edge[c], edge[c + 1], seg)]
    start = time.thread_time()
    for _ in range(iters):
        for a, b in pieces:
            combine_(flat[a:b], landing[: b - a], ReduceOp.SUM)
    return (time.thread_time() - start) / iters


COLUMNS = {  # profile → (column, the thread that runs the algorithm)
    "ours": ("our ring", "python (main)"),
    "unpaced": ("ours, sends unpaced", "python (main)"),
    "gloo": ("gloo's all_reduce", "pt_gloo_runloop"),
}
LOOP = "gloo_tcp_loop"  # gloo's transport thread


def cpu_ms(prof: dict, names: set[str], inside: bool = True) -> float:
    """Milliseconds of CPU per call of the threads in ``names`` (or not in them)."""
    got = [v[0] for k, v in prof.items() if k != "wall" and (k in names) == inside]
    return sum(got) * 1e3


def breakdown(profs: dict[str, dict], adds: float) -> list[dict]:
    """Rows of milliseconds per call, a column per profile: the thread that runs the
    algorithm, its time off the CPU, gloo's transport thread, the rest; hand-offs."""
    cols = {key: COLUMNS[key] for key in profs}

    def row(what: str, value) -> None:
        rows.append(
            {"per call, per rank": what}
            | {c: value(k, t) for k, (c, t) in cols.items()}
        )

    rows: list[dict] = []
    row("CPU, the thread that runs it (ms)", lambda k, t: cpu_ms(profs[k], {t}))
    row(
        "… of which the additions, timed alone (ms)",
        lambda k, t: adds * 1e3 if t == "python (main)" else "—",
    )
    row(
        "the thread that runs it, off the CPU (ms)",
        lambda k, t: profs[k]["wall"][0] * 1e3 - cpu_ms(profs[k], {t}),
    )
    row("CPU, gloo's transport thread (ms)", lambda k, t: cpu_ms(profs[k], {LOOP}))
    row("CPU, other threads (ms)", lambda k, t: cpu_ms(profs[k], {t, LOOP}, False))
    row("CPU, all threads (ms)", lambda k, t: cpu_ms(profs[k], set(), False))
    row("voluntary context switches", lambda k, t: switches(profs[k]))
    row("wall, back to back (ms)", lambda k, t: profs[k]["wall"][0] * 1e3)
    return rows


def switches(prof: dict) -> float:
    return sum(v[1] for k, v in prof.items() if k != "wall")


def target_sentence(size: str, p: int, ratio: Spread) -> str:
    """The target's outcome, from this run: the paired ratio's IQR against TARGET."""
    return (
        f"Our ring at {size} on {p} ranks: {ratio.text()} × gloo's busbw (median "
        f"[IQR] of the paired rounds); against the {TARGET}× target: "
        f"{target_outcome(ratio)}."
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--mib", type=positive_int, default=64, help="buffer size in MiB (default 64)"
    )
    parser.add_argument(
        "--rounds",
        type=positive_int,
        default=9,
        help="paired rounds of ours and gloo's (default 9)",
    )


def main(mib: int = 64, rounds: int = 9) -> dict:
    p, numel = dist.get_world_size(), (mib << 20) // 4  # float32
    ring = functools.partial(ring_allreduce, check=False)
    check("all_reduce", "ring", ring, numel, p)  # exactly gloo's result first
    ours, _ = make_call("all_reduce", ring, numel, p)
    gloo, _ = make_call("all_reduce", dist.all_reduce, numel, p)
    # in busbw, ours ÷ gloo's: gloo's time ÷ ours, round by round
    ratio = spread(paired(ours, gloo, rounds, cpu_clock=time.process_time), "speedup")
    with busy_core():  # the same rounds with one core taken by another program
        loaded = spread(paired(ours, gloo, rounds), "speedup")
    iters = max(2, rounds // 3)
    unpaced, _ = make_call("all_reduce", functools.partial(ring, lead=None), numel, p)
    fns = {"ours": ours, "unpaced": unpaced, "gloo": gloo}
    samples: dict[str, list] = {k: [] for k in fns}
    for key in [*fns, *reversed(fns)]:  # a drifting load favours none of them
        samples[key].append(per_call(fns[key], iters))
    profs = {
        k: {
            n: [statistics.mean(x.get(n, [0, 0])[i] for x in v) for i in (0, 1)]
            for n in set(v[0]) | set(v[1])
        }
        for k, v in samples.items()
    }
    rows = breakdown(profs, addition_cpu(numel, p))
    clocked = any(name != "wall" for prof in profs.values() for name in prof)
    if not clocked:  # no thread's clock was read: the rows of CPU would say 0
        rows = [r for r in rows if r["per call, per rank"].startswith("wall")]
    total = {k: cpu_ms(prof, set(), False) for k, prof in profs.items()}
    by = {r["per call, per rank"]: r for r in rows}

    def minus(what: str, col: str) -> float:
        return (
            by[f"CPU, {what} (ms)"][col] - by[f"CPU, {what} (ms)"]["gloo's all_reduce"]
        )

    lines = [
        target_sentence(f"{mib} MiB", p, ratio),
        f"With one core kept busy by another program the same rounds gave "
        f"{loaded.text()}: load moved the median by {loaded.median - ratio.median:+.2f}"
        f" ({target_outcome(loaded)}).",
    ]
    what = ("the thread that runs it", "gloo's transport thread", "other threads")
    if clocked:
        d = [minus(w, "our ring") for w in what]
        lines += [
            f"CPU per call and rank, every thread: ours {total['ours']:.1f} ms, "
            f"gloo's {total['gloo']:.1f} ms ({total['ours'] / total['gloo']:.2f}×).",
            f"Ours − gloo's, CPU ms per call: the thread that runs it {d[0]:+.1f}, "
            f"gloo's transport thread {d[1]:+.1f} (with every send posted as soon as "
            f"it is ready: {minus(what[1], 'ours, sends unpaced'):+.1f}), the other "
            f"threads {d[2]:+.1f}.",
        ]
    else:
        lines.append(NO_CLOCKS)
    for line in lines:
        print0(textwrap.fill(line, 88, subsequent_indent="  "))
    return {
        "tables": {"threads": rows},
        "markdown": {  # the target: one run, which both notes include
            "target": f"- {lines[0]}",
            "verdict": "\n".join(f"- {line}" for line in lines[1:]),
        },
        "ratio": list(ratio),
        "ratio_loaded": list(loaded),
        "target": TARGET,
        "outcome": verdict(ratio, TARGET),
        "cpu_ms": total if clocked else None,
        "profile": profs,
    }


if __name__ == "__main__":
    raise SystemExit(main_entry(main, SPEC))
