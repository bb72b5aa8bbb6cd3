"""Exercises of "Sizing": a GPT's parameter count and ZeRO's bytes per GPU.

The parameter count is held to the real model: ``sum(p.numel())`` of the tiny GPT
built with the same dimensions (``parameters()`` yields a tied weight once), and to
GPT-2 small's published 124,439,808. ZeRO's bytes are held to the paper's own table
(Rajbhandari et al. 2020, arXiv:1910.02054, Figure 1: 7.5B parameters on 64 GPUs,
120 GB, 31.4 GB, 16.6 GB and 1.88 GB) and to its definition of the stages: P_os
shards the optimizer states, P_os+g the gradients too, P_os+g+p the parameters too.
"""

from __future__ import annotations

import torch

from snippets.exercises.engine import Exercise, Grade
from snippets.models.tiny_gpt import GPT, GPTConfig
from snippets.sizing.params import total_params
from snippets.sizing.zero_memory import model_state_bytes

# GPT-2 small, as published (huggingface.co/openai-community/gpt2): its dimensions,
# and the parameter count of the released checkpoint, tied head counted once.
GPT2_SMALL = {"V": 50257, "s": 1024, "L": 12, "h": 768, "a": 12}
GPT2_SMALL_PARAMS = 124_439_808

GPT_SHAPES = (  # V, s, L, h, a, tied, bias
    (64, 16, 2, 32, 2, True, True),  # the tiny GPT every snippet trains
    (37, 7, 3, 15, 3, False, False),  # odd sizes, nothing shared, no biases
    (50, 9, 1, 24, 4, False, True),
    (29, 11, 4, 16, 2, True, False),
)


def check_gpt_params(fn, grade: Grade) -> None:
    for V, s, L, h, a, tied, bias in GPT_SHAPES:
        title = (
            f"V={V} s={s} L={L} h={h}, {'tied' if tied else 'untied'} head, "
            f"{'biases' if bias else 'no biases'}"
        )
        with grade.case(title) as case:
            got = case.call(fn, "gpt", V, s, L, h, a, a, 4 * h, tied, bias)
            got = case.number(got, "the count")
            if got is None:
                continue
            config = GPTConfig(V, s, L, a, h, bias=bias, tie_embeddings=tied)
            want = sum(p.numel() for p in GPT(config).parameters())  # the oracle
            norms = (2 * L + 1) * h * (1 + bias)
            case.equal(
                got,
                torch.tensor(float(want), dtype=torch.float64),
                "the count",
                mistakes=(
                    (want + V * h, "the tied head is counted: it is the embedding"),
                    (want - norms, "the LayerNorms are left out (2 a layer + 1)"),
                    (want - h * (1 + bias), "the final LayerNorm is missing"),
                    (want - s * h, "the position embedding (s × h) is missing"),
                    (
                        sum(
                            p.numel()
                            for n, p in GPT(config).named_parameters()
                            if not n.endswith(".bias")
                        ),
                        "the biases are left out (every Linear and LayerNorm has one)",
                    ),
                ),
            )
    with grade.case("GPT-2 small: 124,439,808, as published") as case:
        g = GPT2_SMALL
        args = ("gpt", g["V"], g["s"], g["L"], g["h"], g["a"], g["a"], 4 * g["h"])
        got = case.number(case.call(fn, *args, True, True), "the count")
        if got is not None:
            want = torch.tensor(float(GPT2_SMALL_PARAMS), dtype=torch.float64)
            case.equal(got, want, "the count")


# The paper's Figure 1: Ψ = 7.5B, N_d = 64, K = 12, fp16 parameters and gradients.
PAPER_PSI, PAPER_N = 7.5e9, 64
PAPER_GB = {0: 120, 1: 31.4, 2: 16.6, 3: 1.88}
# and its stages: which of (parameters, gradients, optimizer) each one shards
SHARDED = {0: (), 1: ("optimizer",), 2: ("gradients", "optimizer")}
SHARDED[3] = ("parameters", "gradients", "optimizer")
PARTS = ("parameters", "gradients", "optimizer")


def check_zero_memory(fn, grade: Grade) -> None:
    shapes = ((1e6, 4, 2, 2, 12), (3e5, 3, 4, 4, 8), (1e6, 1, 2, 2, 12))
    for psi, N, p, g, K in shapes:
        for stage in range(4):
            title = f"stage {stage}, Ψ={psi:g}, N={N}, (p, g, K)=({p}, {g}, {K})"
            with grade.case(title) as case:
                got = case.call(fn, stage, psi, N, p, g, K)
                if not isinstance(got, dict) or set(PARTS) - set(got):
                    case.fail(f"it returns no dict with {', '.join(PARTS)} and total")
                    continue
                full = {
                    "parameters": p * psi,
                    "gradients": g * psi,
                    "optimizer": K * psi,
                }
                want = {
                    part: full[part] / (N if part in SHARDED[stage] else 1)
                    for part in PARTS
                }
                for part in PARTS:
                    value = case.number(got[part], part)
                    if value is None:
                        break
                    other = full[part] / N if want[part] == full[part] else full[part]
                    hint = (
                        f"{part} are sharded only from stage "
                        f"{min(s for s in SHARDED if part in SHARDED[s])}: stage 1 "
                        "shards the optimizer states, 2 the gradients too, 3 all"
                    )
                    case.equal(
                        value,
                        torch.tensor(want[part], dtype=torch.float64),
                        f"{part} bytes",
                        rtol=1e-12,
                        mistakes=((other, hint),) if N > 1 else (),
                    )
                value = case.number(got.get("total"), "total")
                if value is not None:
                    total = torch.tensor(sum(want.values()), dtype=torch.float64)
                    case.equal(value, total, "total bytes", rtol=1e-12)

    for stage, gb in PAPER_GB.items():
        with grade.case(f"the paper's stage {stage}: {gb} GB on each of 64") as case:
            got = case.call(fn, stage, PAPER_PSI, PAPER_N, 2, 2, 12)
            if not isinstance(got, dict) or "total" not in got:
                case.fail("it returns no dict with a 'total' (and each part)")
                continue
            total = case.number(got["total"], "total")
            if total is not None:  # the paper prints 3 significant digits
                want = torch.tensor(gb * 1e9, dtype=torch.float64)
                case.equal(total / 1e9, want / 1e9, "GB in total", rtol=5e-3)


CHECKS = [
    Exercise(name="zero_memory", function=model_state_bytes, check=check_zero_memory),
    Exercise(name="gpt_params", function=total_params, check=check_gpt_params),
]
