"""Same model, different bits: how far a parallel run may drift from one process on
rounding alone, so that a gap past that budget points at a bug.

Floating-point addition is commutative (a + b and b + a are the same bits) but not
associative: (a + b) + c and a + (b + c) may differ in the last place. An all-reduce
is a sum over ranks in an order its algorithm picks:

* the ring (``ring_allreduce``) adds chunk c along the ring, starting at rank c:
  ((x_c + x_{c+1}) + x_{c+2}) + …, a different order for every chunk; its bits are
  predicted exactly by that fold (``ring_order_sum``), worked out in one process;
* the tree (``tree_allreduce``) adds children into parents up to the root;
* a fixed order (``fixed_order_allreduce``) gathers every rank's tensor (moving
  bits changes none of them) and adds in rank order, x_0 + x_1 + …: the same bits
  whichever algorithm moved the data, and the same as one process adding the same
  tensors in the same order. It costs p times the memory and the bytes of a ring,
  which is why libraries do not do it by default.

Then the training budget, the comparison torchtitan's convergence guide makes: the
tiny GPT trained for ``steps`` steps in one process and on dp2, tp2, pp2 and dp2·tp2
(``gpt_3d``'s parts: ``rank_model``, ``rank_batch``, the pipeline executor,
``average_gradients``), in fp64, fp32 and bf16, from the same seed on the same batch.
The gap, loss on the layout − loss in one process, is rounding only: ~1e-15 in fp64,
growing from ~1e-7 in fp32, and a few bf16 steps of the loss (2⁻⁵ near 4) in bf16,
where the weights, Adam's state and the loss are all bf16 (no fp32 master copy).

    python -m snippets run same_bits                    # both parts, 100 steps
    python -m snippets run same_bits --steps 20 --numel 1000
"""

from __future__ import annotations

import argparse
import math
import textwrap
from functools import partial

import torch
import torch.distributed as dist

from snippets.comm.algorithms.ring_allreduce import ring_allreduce
from snippets.comm.algorithms.tree_allreduce import tree_allreduce
from snippets.comm.messages import bounds
from snippets.core.charts import line_chart
from snippets.core.claims import Law, Observation, check
from snippets.core.cli import main_entry, positive_int
from snippets.core.runtime import Spec, UsageError, device, launch
from snippets.models.tiny_gpt import GPT, GPTConfig, random_batch
from snippets.parallel.gpt_3d import OPTIMIZERS, mean_loss
from snippets.parallel.gpt_3d_model import average_gradients, rank_batch, rank_model
from snippets.parallel.mesh import Mesh
from snippets.parallel.pipeline.pipeline_executor import execute

SPEC = Spec(summary="ring ≠ tree bits, a fixed order = one process; the loss budget")

WORLD = 4  # ranks for the all-reduces: with 2, every order is the same one addition
# (dp, pp, tp) of each layout; "one process" is the control
LAYOUTS = {"dp2": (2, 1, 1), "tp2": (1, 1, 2), "pp2": (1, 2, 1), "dp2·tp2": (2, 1, 2)}
DTYPES = {
    "float64": torch.float64,
    "float32": torch.float32,
    "bfloat16": torch.bfloat16,
}
# Small enough for 12 runs of 100 steps on two cores: L=2, H=2, d=32, V=64, N=16.
CFG = GPTConfig(n_layer=2, n_head=2, n_embd=32, bias=False)
BATCH = 8
BUG = "dp2, gradients not averaged (a bug)"
MAX_NUMEL = 1_000_000  # the exact sums are taken element by element in Python


# --8<-- [start:order]
def ring_order_sum(xs: list[torch.Tensor]) -> torch.Tensor:
    """What ``ring_allreduce`` computes, in one process: chunk c of the p tensors
    added left to right from rank c round the ring (its reduce-scatter's order)."""
    p, out = len(xs), torch.empty_like(xs[0])
    edge = bounds(out.numel(), p)  # the ring's chunks
    for c in range(p):
        a, b = edge[c], edge[c + 1]
        acc = xs[c][a:b].clone()
        for k in range(1, p):
            acc += xs[(c + k) % p][a:b]
        out[a:b] = acc
    return out


def fixed_order_sum(xs: list[torch.Tensor]) -> torch.Tensor:
    """x_0 + x_1 + … + x_{p−1}, left to right: one order for every element."""
    acc = xs[0].clone()
    for x in xs[1:]:
        acc += x
    return acc


def fixed_order_allreduce(tensor: torch.Tensor, move=None) -> None:
    """SUM in place with bits that do not depend on how the data moved: every rank
    gets every rank's tensor, then adds them in rank order. ``move`` is an
    all-reduce used only to move data (each rank's tensor in its own row, zeros
    elsewhere, so each element adds one value to zeros: exact, -0.0 aside); None
    uses ``dist.all_gather``, which copies."""
    p, rank = dist.get_world_size(), dist.get_rank()
    rows = tensor.new_zeros(p, tensor.numel())  # (p, n)
    if move is None:
        dist.all_gather(list(rows), tensor.reshape(-1))
    else:
        rows[rank] = tensor.reshape(-1)
        move(rows)
    tensor.copy_(fixed_order_sum(list(rows)).view_as(tensor))


# --8<-- [end:order]


def rank_data(rank: int, numel: int, dtype: torch.dtype) -> torch.Tensor:
    """Rank ``rank``'s tensor, the same wherever it is made: normals of mixed scale
    (×10^k, k in −3..3), so that additions round."""
    g = torch.Generator().manual_seed(1000 + rank)
    x = torch.randn(numel, generator=g, dtype=torch.float64)
    scale = 10.0 ** torch.randint(-3, 4, (numel,), generator=g)
    return (x * scale).to(dtype)


def error_over_bound(sums: list[torch.Tensor], xs: list[torch.Tensor]) -> float:
    """The worst |sum − exact| over the rounding bound of a p-term sum in any order,
    (p − 1)·u·Σ|x| (u: unit roundoff; Jeannerod and Rump, 2013): at most 1 for a
    correct all-reduce. The exact sum is math.fsum of each element's p values,
    correctly rounded to fp64: exact for fp32 data, within 2⁻⁵³ of it for fp64."""
    p, u = len(xs), torch.finfo(xs[0].dtype).eps / 2
    columns = torch.stack(xs).double().T.tolist()  # (n, p)
    exact = torch.tensor([math.fsum(c) for c in columns], dtype=torch.float64)
    bound = (p - 1) * u * torch.stack(xs).double().abs().sum(0) + 2**-53 * exact.abs()
    return max(((s.double() - exact).abs() / bound).max().item() for s in sums)


# --8<-- [start:bits]
def all_reduce_bits(numel: int, dtype: torch.dtype) -> dict:
    """One tensor a rank, all-reduced every way; each result's bits against the
    others' and against sums worked out in one process."""
    p, rank = dist.get_world_size(), dist.get_rank()
    xs = [rank_data(r, numel, dtype) for r in range(p)]  # what every rank holds
    ways = {
        "ring": ring_allreduce,
        "tree": tree_allreduce,
        "dist": dist.all_reduce,
        "fixed, gathered": fixed_order_allreduce,
        "fixed, moved by ring": partial(fixed_order_allreduce, move=ring_allreduce),
        "fixed, moved by tree": partial(fixed_order_allreduce, move=tree_allreduce),
        "ring again": ring_allreduce,  # is the ring the same as itself?
    }
    got = {}
    for name, way in ways.items():
        got[name] = xs[rank].clone()
        way(got[name])
    fixed = [got[n] for n in ways if n.startswith("fixed")]

    def differ(a: torch.Tensor, b: torch.Tensor) -> int:  # elements whose bits differ
        return int((a.view(-1) != b.view(-1)).sum())

    return {
        "dtype": str(dtype).removeprefix("torch."),
        "ring ≠ tree": differ(got["ring"], got["tree"]),
        "ring ≠ dist": differ(got["ring"], got["dist"]),
        "tree ≠ dist": differ(got["tree"], got["dist"]),
        "ring ≠ ring again": differ(got["ring"], got["ring again"]),
        "ring ≠ its order": differ(got["ring"], ring_order_sum(xs)),
        "fixed ≠ one process": max(differ(f, fixed_order_sum(xs)) for f in fixed),
        "error / bound": error_over_bound([got[n] for n in ways], xs),
    }


# --8<-- [end:bits]


# --8<-- [start:train]
def one_process_losses(dtype: torch.dtype, steps: int) -> list[float]:
    """The control: the dense GPT on the whole batch, in one process."""
    model = GPT(CFG).to(dtype)  # the seed alone fixes its weights
    make, kwargs = OPTIMIZERS["adam"]
    opt = make(model.parameters(), **kwargs)
    idx, targets = random_batch(CFG, BATCH)  # one batch, learnt: the loss falls
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = model(idx, targets)[1]
        loss.backward()
        losses.append(loss.item())
        opt.step()
    return losses


def layout_losses(
    dp: int, pp: int, tp: int, dtype: torch.dtype, steps: int, sync: bool = True
) -> list[float]:
    """The same model, seed and batch on a dp × pp × tp mesh: ``gpt_3d``'s step
    without its per-step checks. 1F1B with m = pp micro-batches (one where there is
    no pipeline), tensor parallel without sequence parallel: half the collectives.
    ``sync=False`` is a bug on purpose: gradients are never averaged over dp."""
    mesh, sp = Mesh(dp=dp, pp=pp, tp=tp), False
    model = rank_model(CFG, mesh, 1, dtype, device=device(), sequence_parallel=sp)
    make, kwargs = OPTIMIZERS["adam"]
    opt = make(model.parameters(), **kwargs)
    idx, targets = random_batch(CFG, BATCH)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        mine = rank_batch(idx, targets, mesh, sp)  # this rank's rows and tokens
        run = execute(model, "1f1b", *mine, pp, 1, group=mesh.pp_group)
        if sync:
            average_gradients(model, mesh)  # Σ over dp, then ÷ dp
        losses.append(mean_loss(run.loss, mesh, dtype))
        opt.step()
    return losses


# --8<-- [end:train]


def every_dtype(dp: int, pp: int, tp: int, steps: int) -> dict[str, list[float]]:
    """One layout's losses in each dtype, one launch for all three."""
    return {name: layout_losses(dp, pp, tp, d, steps) for name, d in DTYPES.items()}


def loss_gaps(steps: int) -> dict[str, dict[str, list[float]]]:
    """{dtype: {layout: loss on the layout − loss in one process, per step}}, and
    the control's own losses under "one process"."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as a rank has: on a loaded machine threads that spin
    try:  # cost ten times as much, and one thread fixes the control's own order
        control = {n: one_process_losses(d, steps) for n, d in DTYPES.items()}
    finally:
        torch.set_num_threads(threads)
    gaps = {name: {"one process": losses} for name, losses in control.items()}
    for layout, (dp, pp, tp) in LAYOUTS.items():
        got = launch(every_dtype, dp * pp * tp, "gloo", args=(dp, pp, tp, steps))[0]
        for name, losses in got.items():
            gaps[name][layout] = [a - b for a, b in zip(losses, control[name])]
    # what a bug looks like beside them: dp2 whose gradients are never averaged
    bug = launch(layout_losses, 2, "gloo", args=(2, 1, 1, torch.float32, steps, False))
    gaps["float32"][BUG] = [a - b for a, b in zip(bug[0], control["float32"])]
    return gaps


def gap_rows(gaps: dict) -> list[dict]:
    """One row per dtype and layout: the largest |gap| over all steps, the first ten
    and the last ten, and the largest in units of the dtype's unit roundoff u of the
    loss (how many roundings of the loss it is)."""
    rows = []
    for name, by_layout in gaps.items():
        control = by_layout["one process"]
        u = torch.finfo(DTYPES[name]).eps / 2
        for layout, gap in by_layout.items():
            if layout == "one process":
                continue
            rel = max(abs(g) / abs(c) for g, c in zip(gap, control)) / u
            rows.append(
                {
                    "dtype": name,
                    "layout": layout,
                    "max |gap|": max(map(abs, gap)),
                    "first 10 steps": max(map(abs, gap[:10])),
                    "last 10 steps": max(map(abs, gap[-10:])),
                    "max |gap| / (u·loss)": rel,
                    "steps bit-equal": sum(g == 0 for g in gap),
                }
            )
    return rows


def figures(gaps: dict, steps: int) -> dict:
    charts = {}
    for name, by_layout in gaps.items():
        series = {
            layout: [(step, gap) for step, gap in enumerate(g)]
            for layout, g in by_layout.items()
            if layout in LAYOUTS
        }
        charts[f"gap_{name}"] = line_chart(
            series,
            title=f"{name}: loss on each layout − loss in one process, {steps} steps",
            x_label="step",
            y_label=f"loss gap ({name})",
            description=f"The tiny GPT's loss on dp2, tp2, pp2 and dp2·tp2 minus its "
            f"loss in one process, at every step, all in {name}.",
        )
    return charts


def facts(bits: list[dict], rows: list[dict], steps: int, numel: int) -> dict:
    """The numbers the note's sentences read, from this run's tables."""
    f32 = next(r for r in bits if r["dtype"] == "float32")
    gap32 = {r["layout"]: r for r in rows if r["dtype"] == "float32"}
    worst = {
        d: max(r["max |gap|"] for r in rows if r["dtype"] == d and r["layout"] != BUG)
        for d in DTYPES
    }
    found = {
        "steps": steps,
        "n": numel,
        "ring_tree": f32["ring ≠ tree"],
        "share": f32["ring ≠ tree"] / numel,
        "predicted": all(
            r["ring ≠ its order"] == 0 and r["ring ≠ ring again"] == 0 for r in bits
        ),
        "dist": min(min(r["ring ≠ dist"], r["tree ≠ dist"]) for r in bits),
        "bounded": max(r["error / bound"] for r in bits),
        "fixed": max(r["fixed ≠ one process"] for r in bits),
        "f64": worst["float64"],
        "f32": worst["float32"],
        "bf16": worst["bfloat16"],
        "bug": next(r["max |gap|"] for r in rows if r["layout"] == BUG),
        **{k: gap32[k]["max |gap|"] for k in LAYOUTS},
    }
    found["ratio"] = found["bug"] / found["bf16"] if found["bf16"] else math.inf
    growth = [
        g["last 10 steps"] / g["first 10 steps"] if g["first 10 steps"] else math.inf
        for g in (gap32[k] for k in LAYOUTS)
    ]
    found["grow_lo"], found["grow_hi"] = min(growth), max(growth)
    return found


def _growth(f: dict) -> str:
    if f["steps"] < 50:  # a sentence about the long run only where there is one
        return "short"
    return "grows" if f["grow_lo"] > 2 else "shrinks" if f["grow_hi"] < 0.5 else "level"


def _tp_drift(f: dict) -> str:
    cut, whole = min(f["tp2"], f["dp2·tp2"]), max(f["dp2"], f["pp2"])
    return "further" if cut > whole else "not further"


# Laws hold wherever the code is right: bits that must repeat, a sum in a fixed order,
# a proved bound. Everything about how far a layout drifts is rounding this machine
# did, so it is said as it came out.
CLAIMS = [
    Law(
        "The ring gives the same bits when run again, exactly those of its own order "
        "of additions worked out in one process, and every algorithm is within the "
        "rounding bound of a sum in any order (worst: {bounded:.2f} of it).",
        lambda f: f["predicted"] and f["bounded"] <= 1,
    ),
    Observation(
        says={
            "differ": "In fp32 the ring and the tree give different bits for "
            "{ring_tree:,} of {n:,} elements ({share:.0%}), and each differs from "
            "gloo's dist.all_reduce too.",
            "same": "On this run the ring and the tree gave different bits for "
            "{ring_tree:,} of {n:,} elements in fp32, and the fewest either shared "
            "with gloo's dist.all_reduce was {dist:,}: here the orders happened to "
            "agree more than they differ.",
        },
        judge=lambda f: "differ" if f["ring_tree"] > 0 and f["dist"] > 0 else "same",
        cases={
            "differ": {"ring_tree": 5, "n": 1000, "share": 0.005, "dist": 3},
            "same": {"ring_tree": 0, "n": 1000, "share": 0.0, "dist": 0},
        },
    ),
    Law(
        "Added in one fixed order, the sum has the same bits whichever algorithm "
        "moved the data, and the same as one process adding in that order, in fp32 "
        "and in fp64.",
        lambda f: f["fixed"] == 0,
    ),
    Observation(
        says={
            "apart": "Over {steps} steps the largest loss gap of any layout is "
            "{f64:.1e} in fp64, {f32:.1e} in fp32 and {bf16:.1e} in bf16: each dtype "
            "has its own budget, each over a hundred times the one before.",
            "close": "Over {steps} steps the largest loss gap of any layout is "
            "{f64:.1e} in fp64, {f32:.1e} in fp32 and {bf16:.1e} in bf16: on this run "
            "two dtypes' budgets came within a hundred times of each other.",
        },
        judge=lambda f: (
            "apart"
            if f["f64"] * 100 < f["f32"] and f["f32"] * 100 < f["bf16"]
            else "close"
        ),
        cases={
            "apart": {"steps": 100, "f64": 1e-15, "f32": 1e-6, "bf16": 1e-2},
            "close": {"steps": 100, "f64": 1e-15, "f32": 1e-6, "bf16": 1e-5},
        },
    ),  # fmt: skip
    Observation(
        says={
            "apart": "A real bug, dp2 whose gradients are never averaged, opens a gap "
            "of {bug:.1e} in fp32: over a thousand times the largest rounding gap.",
            "close": "A real bug, dp2 whose gradients are never averaged, opens a gap "
            "of {bug:.1e} in fp32: on this run less than a thousand times the largest "
            "rounding gap ({f32:.1e}).",
        },
        judge=lambda f: "apart" if f["bug"] > 1000 * f["f32"] else "close",
        cases={
            "apart": {"bug": 0.3, "f32": 1e-6},
            "close": {"bug": 1e-4, "f32": 1e-6},
        },
    ),
    Observation(
        says={
            "coarse": "In bf16 the rounding gap reaches {bf16:.1e}, only {ratio:.0f} "
            "times less than that bug's: there a loss curve is a coarse test.",
            "fine": "In bf16 the rounding gap reaches {bf16:.1e}, {ratio:.0f} times "
            "less than that bug's: on this run even a bf16 loss curve told them "
            "apart.",
            "lost": "In bf16 the rounding gap reaches {bf16:.1e}, as far as that "
            "bug's or further: there a loss curve cannot tell rounding from a bug.",
        },
        judge=lambda f: (
            "lost" if f["ratio"] <= 1 else "coarse" if f["ratio"] < 100 else "fine"
        ),
        cases={
            "coarse": {"bf16": 1e-2, "ratio": 30.0},
            "fine": {"bf16": 1e-4, "ratio": 3000.0},
            "lost": {"bf16": 0.3, "ratio": 1.0},
        },
    ),
    Observation(
        says={
            "further": "In fp32 the layouts that cut matrix products, tp2 ({tp2:.1e}) "
            "and dp2·tp2 ({dp2·tp2:.1e}), drift further than dp2 ({dp2:.1e}) and pp2 "
            "({pp2:.1e}): a product cut in two adds in a new order in every layer.",
            "not further": "In fp32 the layouts that cut matrix products, tp2 "
            "({tp2:.1e}) and dp2·tp2 ({dp2·tp2:.1e}), did not both drift further than "
            "dp2 ({dp2:.1e}) and pp2 ({pp2:.1e}) on this run.",
        },
        judge=_tp_drift,
        cases={
            "further": {"tp2": 2e-6, "dp2·tp2": 3e-6, "dp2": 1e-6, "pp2": 0.0},
            "not further": {"tp2": 2e-7, "dp2·tp2": 3e-6, "dp2": 1e-6, "pp2": 0.0},
        },
    ),
    Observation(
        says={
            "tight": "In fp64 no layout strays further than 1e-12 from one process, so "
            "there a gap of 1e-6 is a bug, not rounding.",
            "loose": "In fp64 a layout strayed {f64:.1e} from one process on this run, "
            "more than 1e-12: read the fp64 budget off this table, not off that "
            "number.",
        },
        judge=lambda f: "tight" if f["f64"] < 1e-12 else "loose",
        cases={"tight": {"f64": 1e-15}, "loose": {"f64": 1e-9}},
    ),
    Observation(
        says={
            "grows": "In fp32 each layout's gap over the last ten steps is "
            "{grow_lo:.0f} to {grow_hi:.0f} times its gap over the first ten: the "
            "budget grows with the steps, as small differences in the weights feed "
            "the next step.",
            "level": "In fp32 each layout's gap over the last ten steps is "
            "{grow_lo:.2g} to {grow_hi:.2g} times its gap over the first ten: on this "
            "run the budget did not grow with the steps for every layout.",
            "shrinks": "In fp32 each layout's gap over the last ten steps is "
            "{grow_lo:.2g} to {grow_hi:.2g} times its gap over the first ten: on this "
            "run the gaps shrank as training went on.",
            "short": "{steps} steps are too few to say whether the budget grows.",
        },
        judge=_growth,
        cases={
            "grows": {"steps": 100, "grow_lo": 3.0, "grow_hi": 60.0},
            "level": {"steps": 100, "grow_lo": 0.92, "grow_hi": 40.0},
            "shrinks": {"steps": 100, "grow_lo": 0.1, "grow_hi": 0.4},
            "short": {"steps": 20, "grow_lo": 3.0, "grow_hi": 60.0},
        },
    ),
]


def claims(bits: list[dict], rows: list[dict], steps: int, numel: int) -> list[str]:
    """The note's sentences from this run: laws checked, observations said."""
    return check(CLAIMS, facts(bits, rows, steps, numel))


BITS = ("ring ≠ tree", "ring ≠ dist", "tree ≠ dist", "ring ≠ ring again",
        "ring ≠ its order", "fixed ≠ one process")  # fmt: skip


def show(bits: list[dict], rows: list[dict], steps: int, numel: int) -> None:
    print(f"all-reduce of {numel:,} elements on {WORLD} ranks: elements whose bits "
          "differ")  # fmt: skip
    print("dtype      ring/tree  ring/dist  tree/dist  ring/ring  ring/its order"
          "  fixed/one")  # fmt: skip
    for r in bits:
        print(f"{r['dtype']:<9}" + "".join(f"{r[k]:>11,}" for k in BITS[:4])
              + f"{r[BITS[4]]:>16,}{r[BITS[5]]:>11,}")  # fmt: skip
    print(f"loss gap to one process: max |gap| over {steps} steps")
    print("dtype    " + "".join(f"{layout:>10}" for layout in LAYOUTS))
    for name in DTYPES:
        gap = {r["layout"]: r["max |gap|"] for r in rows if r["dtype"] == name}
        print(f"{name:<9}" + "".join(f"{gap[layout]:>10.1e}" for layout in LAYOUTS))
    bug = next(r for r in rows if r["layout"] == BUG)
    print(f"{BUG}, float32: {bug['max |gap|']:.1e}")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--steps", type=positive_int, default=100)
    parser.add_argument(
        "--numel", type=positive_int, default=100_003, help="elements all-reduced"
    )


def main(steps: int = 100, numel: int = 100_003) -> dict:
    if numel > MAX_NUMEL:
        raise UsageError(
            f"--numel {numel} is more than this check needs: at most {MAX_NUMEL:,}"
        )
    bits = [
        launch(all_reduce_bits, WORLD, "gloo", args=(numel, dtype))[0]
        for dtype in (torch.float32, torch.float64)
    ]
    gaps = loss_gaps(steps)
    rows = gap_rows(gaps)
    said = claims(bits, rows, steps, numel)
    show(bits, rows, steps, numel)
    for sentence in said:
        print(textwrap.fill(sentence, 88, initial_indent="- ", subsequent_indent="  "))
    return {
        "tables": {"bits": bits, "gaps": rows},
        "figures": figures(gaps, steps),
        "markdown": {"claims": "\n".join(f"- {s}" for s in said)},
        "gaps": gaps,
        "provenance": {"backend": "gloo", "world_size": WORLD},
    }


if __name__ == "__main__":
    raise SystemExit(main_entry(main, SPEC))
