"""Four pipeline schedules planned, checked, run on p ranks and drawn as they ran.

For GPipe, 1F1B, interleaved 1F1B (v chunks per rank) and ZB-H1, on the tiny GPT in
float64: the plan passes the validator; its unit-time dry run has exactly the
formula's bubble and its activation count the formula's peak per rank; the executed
run's loss and every gradient equal one process on the whole batch (to 1e-12); the
activations autograd held at the peak equal the plan's count. The executed bubble,
1 - Σ busy / (p × makespan) from the stamps, is set against a replay: the same plan
played with each action's measured time and instant messages. What separates them is
the cost of the messages and the noise of a shared machine, so it is reported, not
checked. ``--trace-dir DIR`` writes one Chrome trace per schedule for Perfetto.

    python -m snippets run pipeline_timeline -n 2 --m 4
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

import torch
import torch.distributed as dist

from snippets.core.charts import Note, timeline_chart
from snippets.core.cli import main_entry, positive_int
from snippets.core.compare import max_difference
from snippets.core.runtime import Spec, print0
from snippets.core.traces import chrome_trace, write_chrome_trace
from snippets.models.tiny_gpt import GPT, GPTConfig, random_batch
from snippets.parallel.pipeline.pipeline_executor import execute
from snippets.parallel.pipeline.pipeline_formulas import bubble_formula, peak_formula
from snippets.parallel.pipeline.pipeline_schedules import (
    NAMES,
    Action,
    check_arguments,
    schedule,
)
from snippets.parallel.pipeline.pipeline_validate import check, peak_in_flight, simulate

SPEC = Spec(
    timed=True,  # it measures time: run-all runs it alone
    summary="GPipe, 1F1B, interleaved, ZB-H1: planned, checked, run, drawn",
    world_size=2,
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--m", type=positive_int, default=4, help="micro-batches")
    parser.add_argument("--chunks", type=positive_int, default=2, help="interleaved v")
    parser.add_argument("--repeats", type=positive_int, default=3)
    parser.add_argument("--trace-dir", default=None, metavar="DIR")


def config(p: int, v: int) -> GPTConfig:
    """Two blocks per stage, wide enough that compute outweighs the messages."""
    return GPTConfig(vocab_size=64, block_size=32, n_layer=2 * p * v, n_embd=64)


# --8<-- [start:oracle]
def gradient_error(model: GPT, reference: GPT) -> tuple[float, list[str]]:
    """Largest |grad - reference grad| over the parameters this rank's stages own,
    and their names (the others must have no gradient at all)."""
    owned = [n for n, q in model.named_parameters() if q.grad is not None]
    return max_difference(model, reference, grads=True), owned


def executed_bubble(per_rank: list[list[dict]]) -> float:
    """1 - Σ busy / (p × makespan), from the stamps (ns after the start barrier)."""
    busy = sum(s["end"] - s["start"] for stamps in per_rank for s in stamps)
    makespan = max(s["end"] for stamps in per_rank for s in stamps)
    return 1 - busy / (len(per_rank) * makespan)


def replayed_bubble(plan: list[list[Action]], per_rank: list[list[dict]], v: int):
    """The plan played with each action's measured time and instant messages."""
    took = {(r, Action(s["kind"], s["microbatch"], s["chunk"])): s["end"] - s["start"]
            for r, stamps in enumerate(per_rank) for s in stamps}  # fmt: skip
    return simulate(plan, v, times=lambda r, a: took[(r, a)]).bubble


# --8<-- [end:oracle]


def spans_and_trace(per_rank: list[list[dict]]) -> tuple[list[dict], dict]:
    """The stamps as chart spans (ms) and as Chrome trace events (µs)."""
    spans, events = [], []
    for r, stamps in enumerate(per_rank):
        events.append([])
        for s in stamps:
            label = repr(Action(s["kind"], s["microbatch"], s["chunk"]))
            ms = {"start": s["start"] / 1e6, "end": s["end"] / 1e6}
            spans.append({"lane": f"rank {r}", "kind": s["kind"], "label": label, **ms})
            events[-1] += [
                {"name": f"wait {label}", "tid": 1, "ts": s["wait"] / 1e3,
                 "dur": (s["start"] - s["wait"]) / 1e3},
                {"name": label, "tid": 0, "ts": s["start"] / 1e3,
                 "dur": (s["end"] - s["start"]) / 1e3},
            ]  # fmt: skip
    return spans, chrome_trace(events, ("compute", "receive"))


def longest_wait(spans: list[dict]) -> Note | None:
    """The longest a rank sat idle between two of its spans (or from the first
    start on any rank to its own first span), noted where it ended: the biggest
    piece of the bubble."""
    t0, waits = min(s["start"] for s in spans), []
    for lane in dict.fromkeys(s["lane"] for s in spans):
        mine = sorted((s for s in spans if s["lane"] == lane), key=lambda s: s["start"])
        ends = [t0] + [s["end"] for s in mine]
        waits += [(s["start"] - end, s) for end, s in zip(ends, mine)]
    gap, span = max(waits, key=lambda w: w[0])
    if gap <= 0:
        return None
    scale, unit = next(u for u in ((1e3, "s"), (1, "ms"), (1e-3, "µs"), (0, "ns"))
                       if gap >= u[0])  # fmt: skip
    idle = f"{gap / (scale or 1e-6):.4g} {unit}"  # 4 digits: 999.7, not 1e+03
    return Note(f"{span['lane']} idle {idle}", span["lane"], span["start"])


def run_one(name: str, p: int, m: int, v: int, repeats: int, data, reference):
    """Plan, check, then run `repeats` times; keep every bubble, the last stamps."""
    plan = schedule(name, p, m, v)
    check(plan, p, m, v)
    bubbles = []
    for _ in range(repeats):
        model = GPT(reference[0].config).to(torch.float64)
        run = execute(model, name, *data, m, v)
        per_rank: list = [None] * p
        dist.all_gather_object(per_rank, run.stamps)
        bubbles.append(executed_bubble(per_rank))
    error, owned = gradient_error(model, reference[0])
    if run.loss is not None:
        error = max(error, abs(run.loss.item() - reference[1]))
    found: list = [None] * p
    dist.all_gather_object(found, (error, owned, run.peak_in_flight))
    return plan, per_rank, bubbles, found


def main(m: int = 4, chunks: int = 2, repeats: int = 3, trace_dir=None) -> dict:
    p = dist.get_world_size()
    for name in NAMES:  # refuse bad input before anything runs
        check_arguments(name, p, m, chunks if name == "interleaved" else 1)
    cfg = config(p, chunks)
    idx, targets = random_batch(cfg, 4 * m)
    reference = GPT(cfg).to(torch.float64)
    loss = reference(idx, targets)[1]  # one process, the whole batch: the oracle
    loss.backward()
    rows, figures, traces = [], {}, {}
    for name in NAMES:
        v = chunks if name == "interleaved" else 1
        plan, per_rank, bubbles, found = run_one(
            name, p, m, v, repeats, (idx, targets), (reference, loss.item())
        )
        unit, formula = simulate(plan, v).bubble, bubble_formula(name, p, m, v)
        assert unit == formula, f"{name}: dry run {unit} ≠ formula {formula}"
        peaks = peak_in_flight(plan)
        assert peaks == peak_formula(name, p, m, v), f"{name}: peaks {peaks}"
        measured = [f[2] for f in found]
        assert measured == peaks, f"{name}: autograd held {measured}, plan {peaks}"
        error = max(f[0] for f in found)
        assert error < 1e-12, f"{name}: gradients differ from one process by {error}"
        every = sorted(n for n, _ in reference.named_parameters())
        assert sorted({n for f in found for n in f[1]}) == every, f"{name}: coverage"
        label = f"{name} (v={v})" if v > 1 else name
        rows.append({
            "schedule": label, "formula": float(formula), "dry_run": float(unit),
            "replay": replayed_bubble(plan, per_rank, v),
            "executed": statistics.median(bubbles),
            "spread": max(bubbles) - min(bubbles),
            "peak_plan": " ".join(map(str, peaks)),
            "peak_autograd": " ".join(map(str, measured)), "max_error": error,
        })  # fmt: skip
        spans, traces[name] = spans_and_trace(per_rank)
        figures[name.replace("-", "_")] = timeline_chart(
            spans, title=f"{label}: p={p}, m={m}, as executed", x_label="time",
            x_unit="ms", kinds=["F", "B", "W"], note=longest_wait(spans),
            description=f"{label} per rank, executed",
        )  # fmt: skip
    if trace_dir and dist.get_rank() == 0:
        for name, trace in traces.items():
            write_chrome_trace(Path(trace_dir, f"pipeline_{name}.json"), trace)
    print0(f"p={p} ranks, m={m} micro-batches, fp64; bubble = idle share of p × time")
    print0("schedule         formula  dry run   replay  executed ± spread  peaks")
    for r in rows:
        print0(
            f"{r['schedule']:<16} {r['formula']:>7.3f} {r['dry_run']:>8.3f} "
            f"{r['replay']:>8.3f} {r['executed']:>9.3f} ± {r['spread']:.3f}  "
            f"{r['peak_autograd']}"
        )
    print0("dry run = formula; autograd's peak = the plan's; loss and gradients equal")
    print0(f"one process to {max(r['max_error'] for r in rows):.1e} ✓")
    gaps = [r["executed"] - r["replay"] for r in rows]
    print0(f"executed - replay: {min(gaps):+.3f} to {max(gaps):+.3f} (messages, noise)")
    return {
        "tables": {"schedules": rows},
        "figures": figures,
        "chrome_traces": traces,
        "provenance": {"backend": dist.get_backend(), "world_size": p},
    }


if __name__ == "__main__":
    raise SystemExit(main_entry(main, SPEC))
