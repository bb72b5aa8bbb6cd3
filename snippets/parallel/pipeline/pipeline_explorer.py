"""Each pipeline schedule run at several settings, for a figure to pick p, m and v.

On 3 ranks, each schedule of ``pipeline_schedules`` runs once for p in {2, 3} (p = 2
on ranks 0 and 1 of their own group), m in {2, 4, 6} and, for interleaved, v = 2
with m a multiple of p, through ``pipeline_executor`` on the tiny GPT in float64.
Each run's loss must equal one process's on the whole batch. The timelines are the
executed stamps; the idle time between a rank's actions, up to the makespan, is the
bubble, drawn grey. ``pipeline_timeline`` is where the schedules are checked against
their formulas; this one only draws them, cheaply.

    python -m snippets run pipeline_explorer -n 3
"""

from __future__ import annotations

import statistics

import torch
import torch.distributed as dist

from snippets.core.charts import picked_timeline
from snippets.core.claims import law, signed
from snippets.core.cli import main_entry
from snippets.core.parts import Excerpt
from snippets.core.runtime import Spec, print0
from snippets.models.tiny_gpt import GPT, random_batch
from snippets.parallel.pipeline.pipeline_executor import execute
from snippets.parallel.pipeline.pipeline_formulas import bubble_formula
from snippets.parallel.pipeline.pipeline_schedules import NAMES
from snippets.parallel.pipeline.pipeline_timeline import (
    config,
    executed_bubble,
    spans_and_trace,
)

SPEC = Spec(
    timed=True,  # it measures time: run-all runs it alone
    summary="the schedules run at several p, m, v: a figure to pick them",
    world_size=3,
)
PS, MS, VS = (2, 3), (2, 4, 6), (1, 2)


def settings(world: int) -> list[tuple[str, int, int, int]]:
    """(schedule, p, m, v) for every run: interleaved only at v = 2 (at v = 1 it is
    1F1B's plan) and with m a multiple of p."""
    return [(name, p, m, 2 if name == "interleaved" else 1) for p in PS if p <= world
            for m in MS for name in NAMES
            if name != "interleaved" or m % p == 0]  # fmt: skip


def with_bubble(spans: list[dict]) -> list[dict]:
    """The spans, and per lane the idle gaps from 0 to the makespan as "bubble"."""
    makespan = max(s["end"] for s in spans)
    out = list(spans)
    for lane in dict.fromkeys(s["lane"] for s in spans):
        t = 0.0
        for s in sorted(
            (s for s in spans if s["lane"] == lane), key=lambda s: s["start"]
        ):
            if s["start"] > t:
                out.append({"lane": lane, "kind": "bubble", "label": "idle", "start": t,
                            "end": s["start"]})  # fmt: skip
            t = max(t, s["end"])
        if makespan > t:
            out.append({"lane": lane, "kind": "bubble", "label": "idle", "start": t,
                        "end": makespan})  # fmt: skip
    return out


def gap_sentence(runs: list[dict]) -> str:
    """How the executed bubbles (idle share of p × the makespan) stood against their
    formulas in these runs."""
    above = sum(r["bubble"] > r["formula"] for r in runs)
    gaps = [r["bubble"] - r["formula"] for r in runs]
    return (
        f"{above} of {len(runs)} executed bubbles came out above the formula's; "
        f"executed minus formula ranged from {signed(min(gaps))} to "
        f"{signed(max(gaps))} (median {signed(statistics.median(gaps))})."
    )


def run_one(name: str, p: int, m: int, v: int, group) -> list[list[dict]] | None:
    """Stamps per rank of the p-rank group (None on the ranks outside it)."""
    cfg = config(p, v)
    idx, targets = random_batch(cfg, m, seed=p * 100 + m * 10 + v)
    stamps = None
    if dist.get_rank() < p:
        reference = GPT(cfg).to(torch.float64)
        want = reference(idx, targets)[1].item()  # one process: the oracle
        run = execute(GPT(cfg).to(torch.float64), name, idx, targets, m, v, group)
        if run.loss is not None:
            law(abs(run.loss.item() - want) < 1e-12, f"{name} p={p} m={m} v={v}")
        stamps = run.stamps
    found: list = [None] * dist.get_world_size()
    dist.all_gather_object(found, stamps)
    return found[:p] if dist.get_rank() < p else None


def main() -> dict:
    world = dist.get_world_size()
    groups = {p: dist.new_group(list(range(p))) for p in PS if p <= world}
    runs, spans, captions = [], [], []
    for name, p, m, v in settings(world):
        per_rank = run_one(name, p, m, v, groups[p])
        if dist.get_rank() != 0:
            continue
        bubble, formula = executed_bubble(per_rank), bubble_formula(name, p, m, v)
        key = {
            "schedule": name,
            "p": p,
            "m": m,
            "v": v if name == "interleaved" else None,
        }
        runs.append(
            key | {"bubble": bubble, "formula": float(formula), "stamps": per_rank}
        )
        ms = [
            s | {"start": round(s["start"], 2), "end": round(s["end"], 2)}
            for s in spans_and_trace(per_rank)[0]
        ]  # 10 µs: enough to see by eye
        spans += [key | s for s in with_bubble(ms)]
        captions.append(key | {"text": f"executed bubble {bubble:.0%} · formula "
                               f"{float(formula):.0%} (unit times)"})  # fmt: skip
    for p in (p for p in PS if p <= world):  # the pairs the plan refuses
        for m in (m for m in MS if m % p):
            captions.append(
                {
                    "schedule": "interleaved",
                    "p": p,
                    "m": m,
                    "v": 2,
                    "text": f"no run: interleaved needs m a multiple of p={p}",
                }
            )
    if dist.get_rank() != 0:
        return {}
    figure = picked_timeline(
        spans,
        settings={"schedule": NAMES, "p": PS[: len(groups)], "m": MS, "v": VS},
        title="Pipeline schedules as executed: pick one",
        x_label="time",
        x_unit="ms",
        kinds=["F", "B", "W", "bubble"],
        idle="bubble",
        captions=captions,
        description="Each rank's forward, backward and weight-gradient spans as they "
        "ran, and its idle time (grey), for the schedule, p, m and v picked.",
    )
    said = Excerpt()  # what the note shows: how many runs, and their check
    said(f"{len(runs)} runs on {world} ranks, fp64; losses equal one process ✓")
    print0("schedule      p  m  v  executed bubble  formula (unit times)")
    for r in runs:
        print0(f"{r['schedule']:<12} {r['p']:>2} {r['m']:>2} {r['v'] or '-':>2} "
               f"{r['bubble']:>16.2f} {r['formula']:>8.2f}")  # fmt: skip
    return {
        "figures": {"schedules": figure},
        "markdown": {"gap": gap_sentence(runs)},
        "excerpts": {"summary": said.lines},
        "runs": runs,
        "provenance": {"backend": dist.get_backend(), "world_size": world},
    }


if __name__ == "__main__":
    raise SystemExit(main_entry(main, SPEC))
