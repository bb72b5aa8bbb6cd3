"""``python -m snippets bench moe``: an MoE layer's step under expert parallelism,
beside the same layer in one process, scaled by the rank count.

    python -m snippets run moe_bench          # 2 ranks: the note's run
    python -m snippets bench moe [-n 2] [--tokens 512] [--rounds 9] [--json]  # the same

A step is a forward and a backward of the layer (fp32, E = 4 experts, top-2, no
capacity limit). Under EP each of the p ranks feeds ``tokens`` tokens and holds E/p
experts; the tokens go to their experts and back by the two all-to-alls. The baseline
is the dense layer (all E experts) on all p·``tokens`` tokens in one process, divided
by p: the time EP would take if splitting the work cost nothing. Both run on every rank
at once, each process with its share of the cores, taking turns through the one
timing harness (``snippets.core.timing``). The ratio EP ÷ (one process ÷ p), per round,
is the price of the split: routing twice over the counts, the all-to-alls, and the
experts' smaller matrix products. Median and IQR over the rounds.
"""

from __future__ import annotations

import json
import textwrap

import torch
import torch.distributed as dist

from snippets.core.claims import Spread
from snippets.core.cli import main_entry, positive_int
from snippets.core.runtime import Spec, UsageError, device, print0
from snippets.core.timing import interleave
from snippets.models.moe import MoE
from snippets.parallel.experts.expert_parallel import ExpertParallelMoE

BENCH = "moe"
SPEC = Spec(
    timed=True,  # it measures time: run-all runs it alone
    summary="an MoE layer's EP step beside one process's, scaled by the rank count",
    world_size=2,
)
DIM, HIDDEN, EXPERTS, TOP_K = 64, 256, 4, 2
TOKENS, ROUNDS = 512, 9


# --8<-- [start:measure]
def measure(tokens: int, rounds: int) -> dict:
    p, rank = dist.get_world_size(), dist.get_rank()
    dense = MoE(DIM, HIDDEN, EXPERTS, TOP_K, seed=0).to(device())
    ep = ExpertParallelMoE.from_dense(dense, None)
    g = torch.Generator().manual_seed(rank)
    mine = torch.randn(tokens, DIM, generator=g).to(device())  # (T, d) this rank's
    everyone = torch.randn(p * tokens, DIM, generator=g).to(device())  # (p·T, d)

    def step(layer, x) -> None:
        layer.zero_grad(set_to_none=True)
        layer(x.requires_grad_()).square().sum().backward()

    rounds_ = interleave(
        {"ep": lambda: step(ep, mine), "one": lambda: step(dense, everyone)}, rounds
    )
    scaled = [t / p for t in rounds_.wall["one"]]  # one process's time ÷ p
    ratio = Spread.of([a / b for a, b in zip(rounds_.wall["ep"], scaled)])
    ep_time, one_time = Spread.of(rounds_.wall["ep"]), Spread.of(scaled)
    return {
        "world_size": p, "tokens": tokens, "rounds": rounds,
        "experts": EXPERTS, "top_k": TOP_K, "dim": DIM, "hidden": HIDDEN,
        "ep_s": ep_time.median, "ep_lo_s": ep_time.lo, "ep_hi_s": ep_time.hi,
        "one_scaled_s": one_time.median, "one_scaled_lo_s": one_time.lo,
        "one_scaled_hi_s": one_time.hi,
        "ratio": ratio.median, "ratio_lo": ratio.lo, "ratio_hi": ratio.hi,
    }  # fmt: skip


# --8<-- [end:measure]


def sentence(r: dict) -> str:
    ratio = Spread(r["ratio"], r["ratio_lo"], r["ratio_hi"])
    said = (
        "slower than perfect scaling"
        if ratio.lo > 1
        else "not separated from perfect scaling: the IQR reaches 1"
    )
    return (
        f"{r['tokens']} tokens a rank on {r['world_size']} ranks: an EP step took "
        f"{r['ep_s'] * 1e3:.2f} ms, one process on all the tokens "
        f"{r['one_scaled_s'] * r['world_size'] * 1e3:.2f} ms "
        f"({r['one_scaled_s'] * 1e3:.2f} ms ÷ {r['world_size']}); EP ÷ (one ÷ p) = "
        f"{ratio.text()} (median [IQR] of {r['rounds']} rounds): {said}."
    )


def add_arguments(parser) -> None:
    parser.add_argument("--tokens", type=positive_int, default=TOKENS, metavar="T")
    parser.add_argument("--rounds", type=positive_int, default=ROUNDS)
    parser.add_argument(
        "--json", dest="as_json", action="store_true", help="the record as JSON"
    )


def check_options(options: dict, world_size: int) -> None:
    """Before any rank starts (``runtime.run`` calls it): the experts split evenly."""
    if EXPERTS % world_size:
        raise UsageError(
            f"-n {world_size}: {EXPERTS} experts do not split over {world_size} "
            "ranks: use a divisor"
        )


def main(tokens: int = TOKENS, rounds: int = ROUNDS, as_json: bool = False) -> dict:
    r = measure(tokens, rounds)
    said = textwrap.fill(sentence(r), 88, subsequent_indent="  ")
    print0(json.dumps(r) if as_json else said)
    row = {
        "tokens a rank": r["tokens"],
        "ranks": r["world_size"],
        "EP step, ms": Spread(r["ep_s"], r["ep_lo_s"], r["ep_hi_s"]).text(scale=1e3),
        "one process ÷ p, ms": Spread(
            r["one_scaled_s"], r["one_scaled_lo_s"], r["one_scaled_hi_s"]
        ).text(scale=1e3),
        "EP ÷ (one ÷ p)": Spread(r["ratio"], r["ratio_lo"], r["ratio_hi"]).text(),
    }
    return r | {"tables": {"step": [row]}}


if __name__ == "__main__":
    raise SystemExit(main_entry(main, SPEC))
