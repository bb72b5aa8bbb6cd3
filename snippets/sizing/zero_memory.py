"""The ZeRO paper's model-state and communication formulas (Rajbhandari et al. 2020,
arXiv:1910.02054, §5 and §7), for Ψ parameters on N data-parallel ranks.

Each value costs p bytes of parameter, g of gradient and K of optimizer state. Mixed
precision Adam (the paper's case): p = g = 2 (fp16), K = 12 (fp32 master weights,
momentum, variance). Plain fp32 Adam: p = g = 4, K = 8. Stage 1 divides K by N, stage
2 also g, stage 3 also p. Communication per step: 2Ψ values for stages 0-2 (an
all-reduce is a reduce-scatter plus an all-gather), 3Ψ for stage 3 (a second
all-gather of the parameters, for the backward pass).
"""

from __future__ import annotations

# --8<-- [start:formulas]
PRECISIONS = {"mixed Adam": (2, 2, 12), "fp32 Adam": (4, 4, 8)}  # (p, g, K) bytes
PAPER = {  # bytes per rank for mixed-precision Adam, as the paper writes them
    0: "16Ψ",
    1: "4Ψ + 12Ψ/N",
    2: "2Ψ + 14Ψ/N",
    3: "16Ψ/N",
}


def model_state_bytes(
    stage: int, psi: float, N: int, p: float, g: float, K: float
) -> dict[str, float]:
    """Bytes one rank holds; stage 0 is plain data parallelism."""
    params = p * psi / (N if stage >= 3 else 1)
    grads = g * psi / (N if stage >= 2 else 1)
    optimizer = K * psi / (N if stage >= 1 else 1)
    return {
        "parameters": params,
        "gradients": grads,
        "optimizer": optimizer,
        "total": params + grads + optimizer,
    }


def comm_values(stage: int, psi: float) -> float:
    """Values handed to collectives per rank per step."""
    return (3 if stage == 3 else 2) * psi


# --8<-- [end:formulas]


# --8<-- [start:padded]
def sharded_bytes(
    stage: int, n_full: int, n_mine: int, p: float, g: float, K: float
) -> dict[str, float]:
    """The formula with the actual shard: n_full = Ψ values replicated, n_mine the
    values of this rank's chunks (Ψ/N up to the rounding of uneven parameters)."""
    params = p * (n_mine if stage >= 3 else n_full)
    grads = g * (n_mine if stage >= 2 else n_full)
    optimizer = K * (n_mine if stage >= 1 else n_full)
    return {
        "parameters": params,
        "gradients": grads,
        "optimizer": optimizer,
        "total": params + grads + optimizer,
    }


# --8<-- [end:padded]


def formula_table(psi: int, precision: str, ranks=range(1, 9)) -> list[dict]:
    """Bytes per rank for stages 0-3 at N = 1…8, from the formula."""
    p, g, K = PRECISIONS[precision]
    return [
        {"N": N}
        | {
            f"stage {s}": round(model_state_bytes(s, psi, N, p, g, K)["total"])
            for s in range(4)
        }
        for N in ranks
    ]
