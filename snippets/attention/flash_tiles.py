"""Which tile shape for the tiled FlashAttention-2: a sweep, recorded, not a guess.

Bigger tiles mean fewer, larger matrix products (less Python per FLOP); a tile of scores
that no longer fits in cache costs more than it saves. Which wins depends on the
machine, so the choice of ``flash_algorithms.BLOCK_Q × BLOCK_K`` is measured here:
forward + backward of ``flash_attention`` at N=1024, d=64, B=H=1, fp32, on one thread,
for every shape in ``TILES``. The shapes take turns, one call each per round, the order
rotating from round to round (``snippets.core.timing.interleave``), so a machine that
gets busier halfway through slows them all alike; each shape reports its median and
interquartile range, and a shape is called faster than another only where the ranges
separate (``snippets.core.claims``).

    python -m snippets run flash_tiles [--rounds 4]
"""

from __future__ import annotations

import argparse
import functools
import textwrap

import torch

from snippets.attention.flash_algorithms import BLOCK_K, BLOCK_Q
from snippets.attention.flash_attention import flash_attention
from snippets.core.claims import Spread, order
from snippets.core.cli import main_entry, positive_int
from snippets.core.runtime import Spec, print0
from snippets.core.timing import interleave

SPEC = Spec(
    timed=True,  # it measures time: run-all runs it alone
    summary="forward + backward time of the tiled FlashAttention per tile shape",
)
TILES = (128, 256, 512, 1024)  # block_q and block_k the sweep tries


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--rounds",
        type=positive_int,
        default=4,
        help="timed rounds, every shape once each (default 4)",
    )


def tile_sweep(rounds: int, N: int = 1024, d: int = 64) -> dict:
    """Forward + backward seconds for each tile shape of TILES (B=1, H=1, fp32, one
    thread), every shape once per round, in turns; the median and IQR of each."""
    gen = torch.Generator().manual_seed(N)
    q, k, v, dO = (torch.randn(1, 1, N, d, generator=gen) for _ in range(4))
    q, k, v = (t.requires_grad_() for t in (q, k, v))  # (1, 1, N, d)
    shapes = {f"{bq}×{bk}": (bq, bk) for bq in TILES for bk in TILES}

    def step(bq: int, bk: int) -> None:
        out = flash_attention(q, k, v, block_q=bq, block_k=bk)
        torch.autograd.grad(out, (q, k, v), dO)

    steps = {name: functools.partial(step, *s) for name, s in shapes.items()}
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # on a shared CPU one thread gives steady ratios
    try:
        step(TILES[0], TILES[0])  # one warm-up for all: autograd, the allocator
        timed = interleave(steps, rounds, warmup=0, device=q.device)
    finally:
        torch.set_num_threads(threads)
    return {s: Spread.of(timed.wall[name]) for name, s in shapes.items()}


def tile_findings(spreads: dict, rounds: int) -> tuple[list[dict], str]:
    """A block_q × block_k table of medians and IQRs (ms), and what it shows."""
    rows = [
        {"block_q": bq}
        | {f"block_k {bk}": spreads[bq, bk].text(1, 1e3) for bk in TILES}
        for bq in TILES
    ]
    first = min(spreads, key=lambda s: spreads[s].median)
    tied = [s for s in spreads if s != first and order(spreads[s], spreads[first]) == 0]
    default = (BLOCK_Q, BLOCK_K)
    where = (
        "the fastest median"
        if default == first
        else "within the fastest's spread"
        if default in tied
        else "slower than the fastest beyond the spread"
    )
    shape = "{}×{}".format
    many = f"{len(tied)} of the other {len(spreads) - 1} shapes"
    listed = ", ".join(shape(*s) for s in tied) or "none"
    text = (
        f"- Forward + backward at N=1024, d=64, one thread, median [IQR] of {rounds} "
        f"interleaved rounds: the fastest median is {shape(*first)}, "
        f"{spreads[first].text(1, 1e3)} ms; within its spread: "
        f"{listed if len(tied) <= 4 else many}.\n"
        f"- The defaults, {shape(*default)}, are {where} in this run."
    )
    return rows, text


def main(rounds: int = 4) -> dict:
    spreads = tile_sweep(rounds)
    rows, text = tile_findings(spreads, rounds)
    print0(f"flash_attention fwd+bwd, N=1024 d=64 fp32, one thread, {rounds} rounds")
    print0("median [IQR] ms, block_q down, block_k across:")
    print0(f"{'':>6}" + "".join(f"{bk:>20}" for bk in TILES))
    for row in rows:
        cells = list(row.values())
        print0(f"{cells[0]:>6}" + "".join(f"{c:>20}" for c in cells[1:]))
    for line in text.splitlines():
        print0(textwrap.fill(line, 88, subsequent_indent="  "))
    return {
        "tables": {"tiles": rows},
        "markdown": {"choice": text},
        "seconds": {f"{bq}x{bk}": list(s) for (bq, bk), s in spreads.items()},
    }


if __name__ == "__main__":
    raise SystemExit(main_entry(main, SPEC))
