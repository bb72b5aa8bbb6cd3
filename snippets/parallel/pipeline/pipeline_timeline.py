"""Four pipeline schedules planned, checked, run on p ranks and drawn as they ran.

For GPipe, 1F1B, interleaved 1F1B (v chunks per rank) and ZB-H1, on the tiny GPT in
float64: the plan passes the validator; its unit-time dry run has exactly the
formula's bubble and its activation count the formula's peak per rank; the executed
run's loss and every gradient equal one process on the whole batch (to 1e-12); the
activations autograd held at the peak equal the plan's count. The executed bubble,
1 - Σ busy / (p × makespan) from the stamps, is set against a replay: the same plan
played with each action's measured time and instant messages. What separates them is
the cost of the messages and the noise of a shared machine (each rank's clock also
starts at its own exit from the barrier), so it is reported, run by run, not checked.

ZB-H1's formula counts a W as long as an F. Here W is only the Linear layers'
weight-gradient products, so ``zb_h1_gap`` renders the median F, B and W times, the
bubble the same plan leaves with them, and the split of the gap to the formula into
compute (replay − formula) and messages (executed − replay). Whether W came out
shorter than F is said as the run found it: it is timed on a shared machine.
``--trace-dir DIR`` writes one Chrome trace per schedule for Perfetto.

    python -m snippets run pipeline_timeline -n 2 --m 4
"""

from __future__ import annotations

import argparse
import statistics
import textwrap
from pathlib import Path

import torch
import torch.distributed as dist

from snippets.core.charts import Note, timeline_chart
from snippets.core.claims import Spread, law, order, signed
from snippets.core.cli import main_entry, positive_int
from snippets.core.compare import max_difference
from snippets.core.parts import Excerpt
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
    """Plan, check, then run `repeats` times; keep every run's bubble, executed and
    replayed, every run's stamps, and the last run's check."""
    plan = schedule(name, p, m, v)
    check(plan, p, m, v)
    bubbles = {"executed": [], "replayed": [], "stamps": []}
    for _ in range(repeats):
        model = GPT(reference[0].config).to(torch.float64)
        run = execute(model, name, *data, m, v)
        per_rank: list = [None] * p
        dist.all_gather_object(per_rank, run.stamps)
        bubbles["executed"].append(executed_bubble(per_rank))
        bubbles["replayed"].append(replayed_bubble(plan, per_rank, v))
        bubbles["stamps"].append(per_rank)
    error, owned = gradient_error(model, reference[0])
    if run.loss is not None:
        error = max(error, abs(run.loss.item() - reference[1]))
    found: list = [None] * p
    dist.all_gather_object(found, (error, owned, run.peak_in_flight))
    return plan, per_rank, bubbles, found


def kind_times(runs: list[list[list[dict]]]) -> dict[str, float]:
    """The median time (ms) of each kind of action, over every rank of every run."""
    took: dict[str, list[float]] = {}
    for per_rank in runs:
        for s in (s for stamps in per_rank for s in stamps):
            took.setdefault(s["kind"], []).append((s["end"] - s["start"]) / 1e6)
    return {kind: statistics.median(t) for kind, t in took.items()}


def gap_facts(found: dict[str, dict], p: int, m: int) -> dict:
    """The numbers behind the note's sentences on the gaps, from every run: the range
    of executed − replay over every run; ZB-H1's median F, B, W, its plan's bubble at
    those times, and its gap to the formula split into compute and messages."""
    zb, f1b = found["zb-h1"], found["1f1b"]
    t = kind_times(zb["stamps"])
    med = {k: statistics.median(zb[k]) for k in ("executed", "replayed")}
    formula = float(bubble_formula("zb-h1", p, m))
    pairs = [zip(f["executed"], f["replayed"]) for f in found.values()]
    gaps = [e - r for run in pairs for e, r in run]
    rank = order(Spread.of(zb["executed"]), Spread.of(f1b["executed"]))
    return {
        "p": p, "m": m, "runs": len(zb["executed"]),
        "gaps": f"{signed(min(gaps), 3)} to {signed(max(gaps), 3)}", **t,
        "w_share": t["W"] / t["F"], "formula": formula,
        "plan_at": float(simulate(schedule("zb-h1", p, m), 1, times=t).bubble),
        "one_f_one_b": float(bubble_formula("1f1b", p, m)), **med,
        "compute": signed(med["replayed"] - formula, 3),
        "messages": signed(med["executed"] - med["replayed"], 3),
        "f1b_executed": statistics.median(f1b["executed"]),
        "versus": {-1: "smaller", 0: "not separated", 1: "larger"}[rank],
    }  # fmt: skip


def zb_h1_gap(facts: dict) -> str:
    """The note's sentences on ZB-H1's gap, rendered from this run. Whether a W was
    shorter than an F is timed on a shared machine, so it is said as the run found it,
    not asserted."""
    short = facts["W"] < facts["F"] and facts["plan_at"] > facts["formula"]
    said = (
        "so the plan at these times leaves more idle than its formula"
        if short
        else "so in this run the plan at these times leaves no more idle than its "
        "formula"
    )
    return "\n".join(
        [
            "- At p = {p}, m = {m}, over {runs} runs and both ranks, ZB-H1's median F "
            "took {F:.1f} ms, B {B:.1f} ms and W {W:.1f} ms: a W was {w_share:.2f} of "
            "an F, where the formula counts it as 1.",
            "- With those three times the ZB-H1 plan itself leaves {plan_at:.3f} of "
            "the time idle, " + said + " ({formula:.3f}); 1F1B's formula, which "
            "no ratio of B to F changes, is {one_f_one_b:.3f}.",
            "- ZB-H1's executed bubble, {executed:.3f} (the median), splits into "
            "{compute} in the compute (its replay, {replayed:.3f}, minus the formula) "
            "and {messages} in the messages (executed minus replay).",
            "- Against 1F1B's executed bubble, {f1b_executed:.3f}, ZB-H1's is "
            "{versus} by the spread (their IQRs over {runs} runs).",
        ]
    ).format_map(facts)


def main(m: int = 4, chunks: int = 2, repeats: int = 3, trace_dir=None) -> dict:
    p = dist.get_world_size()
    for name in NAMES:  # refuse bad input before anything runs
        check_arguments(name, p, m, chunks if name == "interleaved" else 1)
    cfg = config(p, chunks)
    idx, targets = random_batch(cfg, 4 * m)
    reference = GPT(cfg).to(torch.float64)
    loss = reference(idx, targets)[1]  # one process, the whole batch: the oracle
    loss.backward()
    rows, figures, traces, found_by = [], {}, {}, {}
    for name in NAMES:
        v = chunks if name == "interleaved" else 1
        plan, per_rank, bubbles, found = run_one(
            name, p, m, v, repeats, (idx, targets), (reference, loss.item())
        )
        found_by[name] = bubbles
        unit, formula = simulate(plan, v).bubble, bubble_formula(name, p, m, v)
        law(unit == formula, f"{name}: dry run {unit} ≠ formula {formula}")
        peaks = peak_in_flight(plan)
        law(peaks == peak_formula(name, p, m, v), f"{name}: peaks {peaks}")
        measured = [f[2] for f in found]
        law(measured == peaks, f"{name}: autograd held {measured}, plan {peaks}")
        error = max(f[0] for f in found)
        law(error < 1e-12, f"{name}: gradients differ from one process by {error}")
        every = sorted(n for n, _ in reference.named_parameters())
        law(sorted({n for f in found for n in f[1]}) == every, f"{name}: coverage")
        label = f"{name} (v={v})" if v > 1 else name
        rows.append({
            "schedule": label, "formula": float(formula), "dry_run": float(unit),
            "replay": statistics.median(bubbles["replayed"]),
            "executed": statistics.median(bubbles["executed"]),
            "spread": max(bubbles["executed"]) - min(bubbles["executed"]),
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
    said = Excerpt()  # what the note shows: the run and its checks
    said(f"p={p} ranks, m={m} micro-batches, fp64; bubble = idle share of p × time")
    print0("schedule         formula  dry run   replay  executed ± spread  peaks")
    for r in rows:
        print0(
            f"{r['schedule']:<16} {r['formula']:>7.3f} {r['dry_run']:>8.3f} "
            f"{r['replay']:>8.3f} {r['executed']:>9.3f} ± {r['spread']:.3f}  "
            f"{r['peak_autograd']}"
        )
    facts = gap_facts(found_by, p, m)
    gap = zb_h1_gap(facts)
    for line in gap.splitlines():
        print0(textwrap.fill(line[2:], 88, subsequent_indent="  "))
    said("dry run = formula; autograd's peak = the plan's; loss and gradients equal")
    said(f"one process to {max(r['max_error'] for r in rows):.1e} ✓")
    said(f"executed - replay, run by run: {facts['gaps']} (messages, noise)")
    return {
        "tables": {"schedules": rows},
        "markdown": {"zb_h1_gap": gap},
        "excerpts": {"summary": said.lines},
        "figures": figures,
        "chrome_traces": traces,
        "provenance": {"backend": dist.get_backend(), "world_size": p},
    }


if __name__ == "__main__":
    raise SystemExit(main_entry(main, SPEC))
