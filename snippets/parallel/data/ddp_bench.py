"""``python -m snippets bench ddp``: our DDP against torch's DDP, and our ZeRO-3
against torch's FSDP2 (``fully_shard``), step by step in the same run on the same tiny
GPT, at each world size.

    python -m snippets run ddp_bench      # 2 ranks: the table and verdicts of the note
    python -m snippets bench ddp [-n 2] [--rounds 25] [--bucket-cap-mb 25]
        [--pairs ddp zero3] [--json]      # the same program
    torchrun --nproc-per-node 4 -m snippets bench ddp --json

A step is forward, backward, SGD step and ``zero_grad`` on this rank's rows. Each pair
(ours, torch's) starts from the same weights (seed 0) and sees the same batches. After
two untimed steps each, the two take turns step by step for ``rounds`` rounds, who
goes first alternating (``snippets.core.timing``), so a machine that gets busier slows
both alike; a step's time is the slowest rank's. A row gives each side's median step
with its interquartile range, and ``ratio`` = ours ÷ torch's, step against step in the
same round: its median and IQR (the target for DDP: a median of at most 1.05).
``cpu_ratio``: the same for the CPU time of the rank's main thread per step (forward,
autograd, hooks; not gloo's threads), less noisy than wall time where ranks share
cores. For our DDP also the share of all-reduce time hidden inside backward
(``ddp_timeline.hidden_fraction``), per step the mean over the ranks, then the median.
Both pairs train, so their weights must still agree afterwards: ``max_abs_diff``.
``--json`` prints one record per implementation instead of the table and verdicts;
each world size is a run of its own (``-n 4``).
"""

from __future__ import annotations

import argparse
import json
import statistics
import textwrap
import time
from typing import Sequence

import torch
import torch.distributed as dist
from torch.distributed.fsdp import fully_shard
from torch.nn.parallel import DistributedDataParallel as TorchDDP

from snippets.core.cli import (
    main_entry,
    positive_float,
    positive_int,
)
from snippets.core.runtime import (
    Spec,
    device,
    print0,
)
from snippets.core.timing import interleave, record, spread
from snippets.models.tiny_gpt import GPT, GPTConfig, random_batch
from snippets.parallel.data.ddp import DDP
from snippets.parallel.data.ddp_timeline import hidden_fraction, spans
from snippets.parallel.sharded import zero

BENCH = "ddp"
SPEC = Spec(
    timed=True,  # it measures time: run-all runs it alone
    summary="our DDP vs torch DDP, our ZeRO-3 vs FSDP2: step time",
    world_size=2,
)
TARGET = 1.05  # our DDP's step at most this many times torch's
CFG = GPTConfig(vocab_size=256, block_size=64, n_layer=4, n_head=4, n_embd=128)
ROWS = 4  # sequences per rank per step
PAIRS = {"ddp": "torch_ddp", "zero3": "fsdp2"}  # ours → its torch counterpart
LR = 0.1
WARMUP = 2  # untimed steps each: connections, FSDP's lazy init, torch's rebuckets
ROUNDS = 25


class Stepper:
    """One implementation's model, optimizer and batches; ``()`` runs one step."""

    def __init__(self, model, optimizer, batches: list, ddp: DDP | None = None):
        self.model, self.optimizer, self.batches = model, optimizer, batches
        self.ddp, self.count, self.stamps = ddp, 0, []

    def __call__(self) -> None:
        idx, targets = self.batches[self.count % len(self.batches)]
        self.count += 1
        _, loss = self.model(idx, targets)
        t0 = time.perf_counter_ns()
        loss.backward()
        self.optimizer.step()
        self.optimizer.zero_grad()
        if self.ddp is not None:  # a fresh list every backward: kept, not copied
            self.stamps.append((self.ddp.timeline, t0))

    def hidden(self) -> list[float]:
        """Per step, the share of our all-reduce time inside backward."""
        return [hidden_fraction(spans(stamps, t0)) for stamps, t0 in self.stamps]

    def state(self) -> dict[str, torch.Tensor]:
        """The full parameters, gathered if sharded; CPU copies."""
        if isinstance(self.optimizer, zero.ZeroOptimizer):
            found = zero.full_state_dict(self.model)
        else:
            found = self.model.state_dict()
        found = {k.removeprefix("module."): v for k, v in found.items()}
        full = [
            (k, getattr(v, "full_tensor", lambda v=v: v)()) for k, v in found.items()
        ]
        return {k: v.detach().cpu().clone() for k, v in full}


def steppers(pair: str, cfg: GPTConfig, batches: list, bucket_cap_mb: float):
    """(ours, torch's) for ``pair``, same weights, same batches."""
    dev = device()
    sgd = torch.optim.SGD
    if pair == "ddp":
        mine = DDP(GPT(cfg, seed=0).to(dev), bucket_cap_mb=bucket_cap_mb)
        theirs = TorchDDP(GPT(cfg, seed=0).to(dev), bucket_cap_mb=bucket_cap_mb)
        return (
            Stepper(mine, sgd(mine.parameters(), lr=LR), batches, ddp=mine),
            Stepper(theirs, sgd(theirs.parameters(), lr=LR), batches),
        )
    module, optimizer = zero.shard(GPT(cfg, seed=0).to(dev), sgd, 3, lr=LR)
    fsdp = GPT(cfg, seed=0).to(dev)
    for block in fsdp.blocks:  # one unit per block and one for the rest, as ours
        fully_shard(block)
    fully_shard(fsdp)
    return (
        Stepper(module, optimizer, batches),
        Stepper(fsdp, sgd(fsdp.parameters(), lr=LR), batches),
    )


def rank_mean_median(values: list[float]) -> float | None:
    """Per timed step the mean over the ranks, then the median over the steps."""
    if not values:
        return None
    found = torch.tensor(values, dtype=torch.float64, device=device())
    dist.all_reduce(found)
    return statistics.median((found / dist.get_world_size()).tolist())


# --8<-- [start:measure]
def measure(
    rounds: int = ROUNDS,
    bucket_cap_mb: float = 25.0,
    pairs: tuple[str, ...] = tuple(PAIRS),
    cfg: GPTConfig = CFG,
    rows: int = ROWS,
) -> dict:
    """On every rank: one record per pair (the harness's, and what only a training
    step has), plus each side's final weights."""
    p, rank, dev = dist.get_world_size(), dist.get_rank(), device()
    data = random_batch(cfg, rows * p, steps=4)  # four batches, cycled
    batches = [(i.tensor_split(p)[rank].to(dev), t.tensor_split(p)[rank].to(dev))
               for i, t in data]  # fmt: skip
    records, states = [], {}
    for pair in pairs:
        ours, theirs = steppers(pair, cfg, batches, bucket_cap_mb)
        steps = interleave({pair: ours, PAIRS[pair]: theirs}, rounds, warmup=WARMUP)
        found = {"impl": pair, "baseline": PAIRS[pair], "world_size": p}
        found |= record(steps, pair, PAIRS[pair])  # times, ratio, CPU: every round
        states[pair] = ours.state(), theirs.state()
        a, b = states[pair]
        found["max_abs_diff"] = max((a[k] - b[k]).abs().max().item() for k in b)
        found["hidden_fraction"] = rank_mean_median(ours.hidden()[WARMUP:])
        found.update(bucket_cap_mb=bucket_cap_mb, params=cfg.num_params())
        records.append(found)
    return {"records": records, "states": states}


# --8<-- [end:measure]


HEADER = (
    f"{'ours':<6}{'ranks':>5}{'ours ms [IQR]':>18}{'torch ms [IQR]':>19}"
    f"{'ratio [IQR]':>17}{'cpu÷':>6}{'hidden':>7}{'max|Δ|':>9}"
)


def _text(mid: float, lo: float, hi: float, digits: int = 1) -> str:
    """Median [IQR], like 68.6 [66.7–71.2]; at 100 and above, no decimals."""
    text = [f"{x:.{digits if x < 100 else 0}f}" for x in (mid, lo, hi)]
    return f"{text[0]} [{text[1]}–{text[2]}]"


def format_row(r: dict) -> str:
    ms = [_text(*(x * 1e3 for x in spread(r, key)))
          for key in ("time", "baseline_time")]  # fmt: skip
    ratio = _text(*spread(r), digits=2)
    hidden = "-" if r["hidden_fraction"] is None else f"{r['hidden_fraction']:.0%}"
    return (
        f"{r['impl']:<6}{r['world_size']:>5}{ms[0]:>18}{ms[1]:>19}{ratio:>17}"
        f"{r['cpu_ratio']:>6.2f}{hidden:>7}{r['max_abs_diff']:>9.1e}"
    )


def describe(cfg: GPTConfig, rows: int, rounds: int) -> list[str]:
    legend = (
        "ddp: ours vs torch's DDP; zero3: ours vs FSDP2 (fully_shard). A step: "
        f"forward, backward, SGD. {rounds} rounds of one step of each, taking turns; "
        "ms: the median step [its IQR]; ratio: ours ÷ torch's, step against step in "
        "the same round [its IQR]; cpu÷: the same for the main thread's CPU time; "
        "hidden: our all-reduce time inside backward; max|Δ|: weights, ours vs "
        "torch's, after training."
    )
    return [
        f"tiny GPT L={cfg.n_layer} d={cfg.n_embd} N={cfg.block_size} "
        f"V={cfg.vocab_size}: {cfg.num_params():,} fp32 parameters, {rows} rows/rank",
        *textwrap.wrap(legend, width=88),
    ]


def verdict(r: dict) -> str:
    """One sentence from a record: the ratio, its IQR, and what the IQR allows."""
    ours = {"ddp": "our DDP", "zero3": "our ZeRO-3"}[r["impl"]]
    theirs = {"torch_ddp": "torch's DDP", "fsdp2": "FSDP2"}[r["baseline"]]
    lo, hi = r["ratio_lo"], r["ratio_hi"]
    if hi < 1:
        order = "faster: the whole IQR lies below 1"
    elif lo > 1:
        order = "slower: the whole IQR lies above 1"
    else:
        order = "not separated: the IQR reaches 1"
    text = (
        f"At {r['world_size']} ranks a step of {ours} took {r['ratio']:.2f}× the time "
        f"of {theirs} (IQR {lo:.2f}–{hi:.2f} over {r['rounds']} rounds): {order}"
    )
    if r["impl"] == "ddp":
        met = "within" if r["ratio"] <= TARGET else "over"
        text += f"; the median is {met} the {TARGET}× target"
        text += f"; {r['hidden_fraction']:.0%} of its all-reduce time was hidden"
    return text + "."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--rounds", type=positive_int, default=ROUNDS, help="timed steps of each"
    )
    parser.add_argument("--bucket-cap-mb", type=positive_float, default=25.0)
    parser.add_argument(
        "--pairs",
        nargs="+",
        choices=tuple(PAIRS),
        default=list(PAIRS),
        help="ddp (vs torch's DDP), zero3 (vs FSDP2); default both",
    )
    parser.add_argument(
        "--json",
        dest="as_json",
        action="store_true",
        help="one JSON record per implementation, nothing else",
    )


def main(
    rounds: int = ROUNDS,
    bucket_cap_mb: float = 25.0,
    pairs: Sequence[str] = tuple(PAIRS),
    as_json: bool = False,
) -> dict:
    records = measure(rounds, bucket_cap_mb, tuple(pairs))["records"]
    table = describe(CFG, ROWS, rounds) + [HEADER] + [format_row(r) for r in records]
    said = [textwrap.fill(verdict(r), width=88) for r in records]
    shown = [json.dumps(r) for r in records] if as_json else [*table, "", *said]
    for line in shown:
        print0(line)
    return {
        "records": records,
        "verdicts": [verdict(r) for r in records],
        "provenance": {
            "backend": dist.get_backend(),
            "world_size": records[0]["world_size"],
        },
    }


if __name__ == "__main__":
    raise SystemExit(main_entry(main, SPEC))
