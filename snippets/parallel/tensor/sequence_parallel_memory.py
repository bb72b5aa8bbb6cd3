"""What sequence parallelism saves, measured: the activations one tiny GPT layer keeps
for backward, counted from the tensors autograd saves, next to a formula per layout
and Korthikanti et al.'s (2022, section 4, equations 1-4).

The count wraps one block's forward in ``torch.autograd.graph.saved_tensors_hooks``
and adds the bytes of each distinct storage it is handed, parameters left out (a view
of a saved tensor costs nothing more). For a layer of the tiny GPT (s = sequence,
b = batch, h = width, a = heads; no dropout, attention by a fused kernel that keeps
q, k, v, its output and a log-sum-exp per row), element by element:

    dense: 16sbh + 4sb + abs    LN inputs 2sbh, LN mean and 1/σ 4sb, Linear inputs
                                2sbh, q k v 3sbh, attention output sbh + abs,
                                GELU input and output 8sbh
    TP:    4sbh + 4sb + (12sbh + abs)/t   the LN region and the Linear inputs stay
    SP:    (16sbh + 4sb + abs)/t          every term cut in t

Korthikanti et al. count bytes in 16-bit with 1-byte dropout masks and an unfused
attention (the 5as²b term): 34sbh + 5as²b, sbh(10 + 24/t + 5as/(ht)), and
sbh/t · (34 + 5as/h). The same structure: tensor parallelism leaves 10sbh (ours 4sbh)
replicated, sequence parallelism cuts everything in t.
"""

from __future__ import annotations

from fractions import Fraction

import torch
import torch.distributed as dist

from snippets.core.claims import law
from snippets.core.measure import saved_activation_bytes
from snippets.core.runtime import print0
from snippets.parallel.tensor.tensor_parallel import CommLog, own_block


# --8<-- [start:formulas]
def layer_activations(b: int, s: int, h: int, a: int, t: int, layout: str) -> Fraction:
    """Elements one tiny GPT layer saves (see the module docstring)."""
    sbh, sb, abs_ = s * b * h, s * b, a * b * s
    replicated = {"dense": 16 * sbh + 4 * sb + abs_, "tp": 4 * sbh + 4 * sb, "sp": 0}
    cut = {"dense": 0, "tp": 12 * sbh + abs_, "sp": 16 * sbh + 4 * sb + abs_}
    return replicated[layout] + Fraction(cut[layout], t)


def korthikanti_bytes(b: int, s: int, h: int, a: int, t: int, layout: str) -> Fraction:
    """Their equations: 16-bit activations, dropout masks, attention's s×s scores."""
    sbh = s * b * h
    per = {
        "dense": 34 + Fraction(5 * a * s, h),
        "tp": 10 + Fraction(24, t) + Fraction(5 * a * s, h * t),
        "sp": (34 + Fraction(5 * a * s, h)) / t,
    }
    return sbh * per[layout]


# --8<-- [end:formulas]


def compare(dense, tp, sp, b: int, s: int, cfg, group=None) -> list[dict]:
    """Measured vs formula for block 0 of each layout, on one (B, N, d) input."""
    h, a, t = cfg.n_embd, cfg.n_head, dist.get_world_size(group)
    gen = torch.Generator().manual_seed(2)  # the same x on every rank
    x = torch.randn(b, s, h, dtype=torch.float64, generator=gen)
    inputs = {"dense": x, "tp": x, "sp": own_block(x, group, dim=1)}  # SP: N/t
    rows = []
    for layout, model in (("dense", dense), ("tp", tp), ("sp", sp)):
        block, xin = model.blocks[0], inputs[layout].clone().requires_grad_()
        measured = saved_activation_bytes(lambda: block(xin), block) // 8  # fp64
        formula = layer_activations(b, s, h, a, t, layout)
        law(measured == formula, f"{layout}: {measured} saved, formula {formula}")
        paper = korthikanti_bytes(b, s, h, a, t, layout)
        rows.append({"layout": layout, "measured": measured, "formula": int(formula)})
        rows[-1]["paper_bytes"] = float(paper)
    for r in rows:
        r["vs_dense"] = r["measured"] / rows[0]["measured"]
        r["paper_vs_dense"] = r["paper_bytes"] / rows[0]["paper_bytes"]
    return rows


def comm_rows(logs: dict[str, CommLog], b: int, s: int, h: int, t: int) -> list[dict]:
    """Per layer (block 0), per layout: collectives and elements sent per rank."""
    unit = Fraction(b * s * h * (t - 1), t)  # a ring's (t−1)/t of one (b, s, h)
    formula = {"tp": 8 * unit, "sp": 4 * unit + 6 * unit}  # SP: 2 re-gathers more
    rows = []
    for layout, log in logs.items():
        sent = log.sent(tag="blocks.0")
        law(sent == formula[layout], f"{layout}: sent {sent}, formula {formula}")
        row = {"layout": layout, "sent": float(sent), "formula": float(formula[layout])}
        for phase in ("forward", "backward"):
            calls = (
                (log.count(tag="blocks.0", op=op, phase=phase), op.replace("_", "-"))
                for op in ("all_reduce", "all_gather", "reduce_scatter")
            )
            row[phase] = ", ".join(f"{n} {op}" for n, op in calls if n)
        rows.append(row)
    return rows


def print_tables(rows: list[dict], comm: list[dict]) -> None:
    print0("saved activations, one layer (elements, fp64):")
    print0("layout   measured  formula  ÷ dense  Korthikanti ÷ dense")
    for r in rows:
        print0(
            f"{r['layout']:<7} {r['measured']:>9,} {r['formula']:>8,}"
            f"  {r['vs_dense']:>7.3f}  {r['paper_vs_dense']:>19.3f}"
        )
    print0("communication, one layer (elements sent per rank, ring):")
    for r in comm:
        print0(f"{r['layout']:<3} {r['sent']:>7,.0f} = formula {r['formula']:,.0f}")
        print0(f"    forward: {r['forward']}; backward: {r['backward']}")
