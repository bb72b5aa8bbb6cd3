"""``python -m snippets bench pipeline``: our 1F1B step beside torch pipelining's
``Schedule1F1B``, and the bubble our executor measures beside the formula.

    python -m snippets run pipeline_bench     # 2 ranks: the note's run
    python -m snippets bench pipeline [-n 2] [--m 8] [--rounds 15] [--repeats 5]
        [--json]                              # the same program
    torchrun --nproc-per-node 4 -m snippets bench pipeline --json

Step: the tiny GPT in p stages (``layer_split.run_stage``, two blocks each), one
forward and backward of the batch in m micro-batches, fp32; ours is
``pipeline_executor.execute``, torch's is ``pipeline_torch.torch_step`` on the same
stages, micro-batches and loss. Their first steps are checked against each other
(loss, every gradient: ``max_abs_diff``); after one more untimed step each they take
turns step by step for ``rounds`` rounds (``snippets.core.timing``): each side's median
step and IQR, ratio = ours ÷ torch's step against step in the same round with its
median and IQR, ``cpu_ratio`` the same for the main threads' CPU time.

Bubble: a wider model, so a micro-batch's compute outweighs its messages; our 1F1B
run ``repeats`` times after one warm-up, each run's bubble 1 − Σ busy / (p × makespan)
from its stamps (``pipeline_timeline.executed_bubble``), set against the formula's
(p − 1)/(m + p − 1). Where the two differ, ``replayed_bubble`` says why: the same plan
replayed with each action's measured time and instant messages. Close to the executed
bubble, the gap is in the compute (uneven stages, ranks sharing cores); close to the
formula, it is messages.
``ratio``: executed ÷ formula, the median over the runs with its IQR. ``action_ms``:
median and quartiles of the F and B times, how even the compute was; ``f_ms``,
``b_ms``: the median F and the median B. The formula holds for any ratio of B to F
(the plan played with those two medians leaves exactly its bubble), so the run checks
the note's point that a B took longer than an F and that this did not move the bubble.
"""

from __future__ import annotations

import json
import statistics
import textwrap
from typing import Callable

import torch
import torch.distributed as dist

from snippets.core.claims import (
    Law,
    LawBroken,
    Observation,
    Spread,
    check,
    ratio_sentence,
    signed,
)
from snippets.core.cli import (
    main_entry,
    positive_int,
)
from snippets.core.runtime import Spec, UsageError, device, print0
from snippets.core.timing import interleave, record, sentence, spread
from snippets.models.tiny_gpt import GPT, GPTConfig, random_batch
from snippets.parallel.pipeline.pipeline_executor import execute
from snippets.parallel.pipeline.pipeline_formulas import bubble_formula
from snippets.parallel.pipeline.pipeline_schedules import schedule
from snippets.parallel.pipeline.pipeline_timeline import (
    executed_bubble,
    kind_times,
    replayed_bubble,
)
from snippets.parallel.pipeline.pipeline_torch import torch_schedule, torch_step
from snippets.parallel.pipeline.pipeline_validate import simulate

BENCH = "pipeline"
SPEC = Spec(
    timed=True,  # it measures time: run-all runs it alone
    summary="our 1F1B vs torch's Schedule1F1B; bubble vs formula",
    world_size=2,
    min_world_size=2,  # a pipeline of one stage has no bubble to measure
)
TARGET = 1.1  # our step at most this many times torch's
ROUNDS, REPEATS = 15, 5  # paired step rounds; bubble runs
M = 8  # micro-batches a step


def config(p: int, wide: bool = False) -> GPTConfig:
    d = 256 if wide else 64  # wide: the bubble run, compute-bound micro-batches
    return GPTConfig(vocab_size=64, block_size=64, n_layer=2 * p, n_embd=d)


def grads(model: GPT) -> dict[str, torch.Tensor]:
    return {n: q.grad for n, q in model.named_parameters() if q.grad is not None}


# --8<-- [start:steps]
def step_pair(m: int, rows: int) -> tuple[Callable, Callable, float]:
    """Our step and torch's, same weights, stages and micro-batches; their first
    steps' largest difference (loss and gradients, the slowest rank's)."""
    p = dist.get_world_size()
    cfg = config(p)
    idx, targets = random_batch(cfg, rows, device=device())
    mine, theirs = GPT(cfg).to(device()), GPT(cfg).to(device())
    sched = torch_schedule(theirs, "1f1b", m, tuple(targets.shape))

    def ours():
        mine.zero_grad(set_to_none=True)
        return execute(mine, "1f1b", idx, targets, m).loss

    def torchs():
        theirs.zero_grad(set_to_none=True)
        return torch_step(sched, theirs, idx, targets)

    la, lb = ours(), torchs()
    ga, gb = grads(mine), grads(theirs)
    if sorted(ga) != sorted(gb):
        raise LawBroken(f"gradients on different parameters: {sorted(ga)}")
    diffs = [(ga[n] - gb[n]).abs().max().item() for n in ga]
    diffs += [] if la is None else [abs(la.item() - lb.item())]
    worst = torch.tensor(max(diffs), dtype=torch.float64, device=device())
    dist.all_reduce(worst, op=dist.ReduceOp.MAX)
    return ours, torchs, worst.item()


# --8<-- [end:steps]


# --8<-- [start:bubble]
def bubbles(m: int, rows: int, repeats: int) -> dict:
    """Our 1F1B on the wide model, `repeats` runs after one warm-up: the bubble of
    each from its stamps, and of the plan replayed with the measured times."""
    p = dist.get_world_size()
    cfg = config(p, wide=True)
    idx, targets = random_batch(cfg, rows, device=device())
    model, plan = GPT(cfg).to(device()), schedule("1f1b", p, m)
    executed, replayed, steps, took, runs = [], [], [], [], []
    for i in range(repeats + 1):
        model.zero_grad(set_to_none=True)
        run = execute(model, "1f1b", idx, targets, m)
        per_rank: list = [None] * p
        dist.all_gather_object(per_rank, run.stamps)
        if i:  # the first run: connections, allocator; not counted
            executed.append(executed_bubble(per_rank))
            replayed.append(replayed_bubble(plan, per_rank, 1))
            steps.append(max(s["end"] for r in per_rank for s in r) / 1e9)
            took += [s["end"] - s["start"] for r in per_rank for s in r]
            runs.append(per_rank)
    formula = float(bubble_formula("1f1b", p, m))
    found, ms = Spread.of([b / formula for b in executed]), Spread.of(took)
    kinds = kind_times(runs)  # ms: the median F, the median B
    return {
        "impl": "1f1b_bubble", "baseline": "formula", "world_size": p,
        "time_s": statistics.median(steps),
        "bubble": statistics.median(executed), "bubble_formula": formula,
        "bubble_replayed": statistics.median(replayed),
        "ratio": found.median, "ratio_lo": found.lo, "ratio_hi": found.hi,
        "ratios": [b / formula for b in executed],
        "repeats": repeats, "m": m, "d": cfg.n_embd, "rows": rows,
        "action_ms": [ms.median / 1e6, ms.lo / 1e6, ms.hi / 1e6],  # F and B
        "f_ms": kinds["F"], "b_ms": kinds["B"],
        "plan_at": float(simulate(plan, 1, times=kinds | {"W": 0}).bubble),
    }  # fmt: skip


# --8<-- [end:bubble]


def measure(m: int, rounds: int, repeats: int) -> list[dict]:
    p = dist.get_world_size()
    if m < p:
        raise UsageError(f"--m {m}: torch's Schedule1F1B needs m >= p={p}")
    ours, theirs, worst = step_pair(m, m)  # the first steps: the check
    steps = interleave({"ours": ours, "torch": theirs}, rounds, warmup=1)
    step = {"impl": "1f1b", "baseline": "torch_1f1b", "world_size": p}
    step |= record(steps, "ours", "torch")  # times, ratio, CPU: every round
    step.update(max_abs_diff=worst, target=TARGET, m=m, d=config(p).n_embd, rows=m)
    return [step, bubbles(m, m, repeats)]


BUBBLE_CLAIMS = [
    Observation(
        says={
            "longer": "A B took longer than an F ({b_ms:.1f} against {f_ms:.1f} ms): "
            "backward computes two products to forward's one.",
            "not longer": "On this run a B took no longer than an F ({b_ms:.1f} "
            "against {f_ms:.1f} ms), though backward computes two products to "
            "forward's one.",
        },
        judge=lambda r: "longer" if r["b_ms"] > r["f_ms"] else "not longer",
        cases={
            "longer": {"b_ms": 20.0, "f_ms": 10.0},
            "not longer": {"b_ms": 10.0, "f_ms": 10.5},
        },
    ),
    Law(
        "The 1F1B plan played with those two times leaves the formula's bubble "
        "({plan_at:.3f} against {bubble_formula:.3f}).",
        lambda r: abs(r["plan_at"] - r["bubble_formula"]) < 1e-9,
    ),
]


def bubble_point(r: dict) -> list[str]:
    """The note's point on the bubble, said from this run's record: LawBroken where
    the plan no longer leaves the formula's bubble."""
    return check(BUBBLE_CLAIMS, r)


def bubble_sentence(r: dict) -> str:
    """The bubble as the note says it: executed against the formula, the paired
    ratio's side of 1 by its IQR, and the gap split into compute and messages."""
    ratio = ratio_sentence(
        r["ratios"], "executed ÷ formula", "above the formula", "below the formula"
    )
    compute = signed(r["bubble_replayed"] - r["bubble_formula"], 3)
    messages = signed(r["bubble"] - r["bubble_replayed"], 3)
    return (
        f"At {r['world_size']} ranks and m={r['m']} the executed 1F1B bubble was "
        f"{r['bubble']:.3f} of the time; the formula (p−1)/(m+p−1) says "
        f"{r['bubble_formula']:.3f}. {ratio.replace('rounds', 'runs')} An F took "
        f"{r['f_ms']:.1f} ms and a B {r['b_ms']:.1f} ms (medians); played with those "
        f"two times the plan leaves {r['plan_at']:.3f}, the formula's bubble. "
        f"Replayed with each action's own time and instant messages: "
        f"{r['bubble_replayed']:.3f}. Of the gap to the formula, {compute} is in the "
        f"compute (the replay minus the formula: actions that differ from one "
        f"another) and {messages} in the messages and waits between actions "
        f"(executed minus replay). An action took "
        f"{Spread(*r['action_ms']).text(0)} ms (median [quartiles])."
    )


def lines(records: list[dict]) -> list[str]:
    step, bubble = records
    ms = [spread(step, k).text(1, 1e3) for k in ("time", "baseline_time")]
    out = [
        f"1F1B, tiny GPT L={2 * step['world_size']} d={step['d']}, {step['rows']} "
        f"rows in m={step['m']} micro-batches, fp32",
        f"{step['rounds']} rounds of one step each, in turns",
        f"ours ms {ms[0]}   torch ms {ms[1]}   max|Δ| {step['max_abs_diff']:.1e}",
        *textwrap.wrap(sentence(step, "our 1F1B step", "torch's Schedule1F1B"), 88),
        f"bubble run: d={bubble['d']}, {bubble['rows']} rows, median step "
        f"{bubble['time_s'] * 1e3:.0f} ms",
        *textwrap.wrap(bubble_sentence(bubble), 88),
    ]
    return out


def add_arguments(parser) -> None:
    parser.add_argument("--m", type=positive_int, default=M, help="micro-batches")
    parser.add_argument(
        "--rounds", type=positive_int, default=ROUNDS, help="timed steps of each"
    )
    parser.add_argument(
        "--repeats", type=positive_int, default=REPEATS, help="bubble runs"
    )
    parser.add_argument(
        "--json", dest="as_json", action="store_true", help="one record per line"
    )


def check_options(options: dict, world_size: int) -> None:
    """Before any rank starts (``runtime.run`` calls it): torch's schedule needs at
    least as many micro-batches as stages."""
    m = options.get("m", M)
    if m < world_size:
        raise UsageError(f"--m {m}: torch's Schedule1F1B needs m >= p={world_size}")


def main(
    m: int = M, rounds: int = ROUNDS, repeats: int = REPEATS, as_json: bool = False
) -> dict:
    records = measure(m, rounds, repeats)
    point = bubble_point(records[1])  # a plan that breaks the formula fails
    for line in [json.dumps(r) for r in records] if as_json else lines(records):
        print0(line)
    said = [sentence(records[0], "our 1F1B step", "torch's Schedule1F1B")]
    said += [" ".join(point)]
    provenance = {"backend": dist.get_backend(), "world_size": dist.get_world_size()}
    return {"records": records, "verdicts": [*said, bubble_sentence(records[1])],
            "provenance": provenance}  # fmt: skip


if __name__ == "__main__":
    raise SystemExit(main_entry(main, SPEC))
