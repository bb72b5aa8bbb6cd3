"""Online softmax: one pass over the row, a running max and a running denominator.

The safe softmax reads a row three times: once for the max m, once for
d = Σ exp(x - m), once for the output. Milakov & Gimelshein ("Online normalizer
calculation for softmax", 2018, Algorithm 3) fold the first two passes into one: keep
(m, d) while streaming and, whenever the max grows, rescale the denominator seen so far
by exp(m_old - m_new).

Two partial states (m_a, d_a) and (m_b, d_b) over disjoint pieces of a row combine with
the same rescaling (their eq. 4), and that merge is associative and commutative; it is
the whole trick behind FlashAttention's tiles and ring attention's ranks.

Edge cases, decided here and tested:

* ``-inf`` entries (masked positions) contribute exp(-inf) = 0, as in torch.softmax.
* A fully masked row (all ``-inf``) has state (m, d) = (-inf, 0), the identity of the
  merge; the merge never produces NaN. ``online_softmax`` then returns NaN for that
  row, the same as ``torch.softmax`` (0/0): a row that attends to nothing has no
  distribution, and silently returning zeros would hide a masking bug.
* fp16 and bf16 inputs are accumulated in fp32 and the result is cast back.

    python -m snippets run online_softmax
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from snippets.core.claims import law
from snippets.core.cli import main_entry
from snippets.core.runtime import Spec, print0

SPEC = Spec(
    summary="softmax in one streaming pass: the (m, d) recurrence and its merge"
)


class SoftmaxState(NamedTuple):
    """Running max m and running denominator d = Σ exp(x_i - m) of a piece of a row."""

    m: torch.Tensor  # (..., 1) in fp32 (fp64 for fp64 input)
    d: torch.Tensor  # (..., 1)


def _accumulator(x: torch.Tensor) -> torch.Tensor:
    """fp16/bf16 → fp32: a long sum of half-precision terms loses the small ones."""
    return x.to(torch.promote_types(x.dtype, torch.float32))


def _safe(m: torch.Tensor) -> torch.Tensor:
    """The shift to subtract: m itself, or 0 where m = -inf, so that -inf - (-inf) never
    appears (exp of it would be NaN); exp(-inf - 0) = 0 is the right weight there."""
    return torch.where(torch.isneginf(m), torch.zeros_like(m), m)


# --8<-- [start:state]
def softmax_state(x: torch.Tensor, dim: int = -1) -> SoftmaxState:
    """(m, d) of a whole block at once: m = max x, d = Σ exp(x - m), as size-1 dims."""
    x = _accumulator(x)
    m = x.amax(dim=dim, keepdim=True)  # (..., 1, ...)
    d = torch.exp(x - _safe(m)).sum(dim=dim, keepdim=True)
    return SoftmaxState(m, d)


def merge(a: SoftmaxState, b: SoftmaxState) -> SoftmaxState:
    """Combine the states of two disjoint pieces of a row (Milakov & Gimelshein, eq. 4):
    m = max(m_a, m_b),  d = d_a·exp(m_a - m) + d_b·exp(m_b - m).
    Associative and commutative, with identity (-inf, 0)."""
    m = torch.maximum(a.m, b.m)
    shift = _safe(m)
    d = a.d * torch.exp(a.m - shift) + b.d * torch.exp(b.m - shift)
    return SoftmaxState(m, d)


# --8<-- [end:state]


# --8<-- [start:online]
def online_softmax_state(
    x: torch.Tensor, dim: int = -1, block_size: int = 64
) -> SoftmaxState:
    """Stream along ``dim`` block by block, merging each block's state into the
    running one. block_size=1 is exactly the paper's Algorithm 3 (one at a time)."""
    if block_size < 1:
        raise ValueError(f"block_size must be at least 1, got {block_size}")
    n = x.shape[dim]
    shape = list(x.shape)
    shape[dim] = 1
    acc = torch.promote_types(x.dtype, torch.float32)
    state = SoftmaxState(
        torch.full(shape, float("-inf"), dtype=acc, device=x.device),  # the identity
        torch.zeros(shape, dtype=acc, device=x.device),
    )
    for start in range(0, n, block_size):
        state = merge(
            state, softmax_state(x.narrow(dim, start, min(block_size, n - start)), dim)
        )
    return state


def online_softmax(
    x: torch.Tensor, dim: int = -1, block_size: int = 64
) -> torch.Tensor:
    """Equals torch.softmax(x, dim): one streaming pass for (m, d), then
    y = exp(x - m) / d."""
    if not x.is_floating_point():
        raise TypeError(f"online_softmax needs a floating-point tensor, got {x.dtype}")
    if x.dim() == 0:
        raise ValueError("online_softmax needs at least one dimension")
    m, d = online_softmax_state(x, dim, block_size)
    # d = 0 (a row of -inf only) gives 0/0 = NaN, as torch.softmax does
    return (torch.exp(_accumulator(x) - _safe(m)) / d).to(x.dtype)


# --8<-- [end:online]


# --8<-- [start:merge_outputs]
def merge_outputs(
    o_a: torch.Tensor, lse_a: torch.Tensor, o_b: torch.Tensor, lse_b: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Merge two *normalised* partial attention outputs over disjoint key sets.

    A block's output O_a = Σ exp(s - lse_a) v is its softmax-weighted sum, and its
    log-sum-exp lse_a is the state (m, d) = (lse_a, 1). Merging the states gives the
    total lse, and each output is weighted by its share exp(lse_a - lse) of the
    denominator. Shapes: o (..., N, d_head), lse (..., N). A row with lse = -inf (it
    saw no key) weighs 0.
    """

    def state(lse: torch.Tensor) -> SoftmaxState:
        m = _accumulator(lse).unsqueeze(-1)  # (..., N, 1)
        # d = 1, or 0 for a row that saw no key
        return SoftmaxState(m, (~torch.isneginf(m)).to(m.dtype))

    a, b = state(lse_a), state(lse_b)
    m, d = merge(a, b)
    lse = _safe(m) + torch.log(d)  # (..., N, 1); -inf where both saw nothing
    d = d.clamp_min(torch.finfo(d.dtype).tiny)
    w_a = torch.exp(a.m - _safe(m)) * a.d / d  # (..., N, 1)
    w_b = torch.exp(b.m - _safe(m)) * b.d / d
    o = w_a * _accumulator(o_a) + w_b * _accumulator(o_b)  # (..., N, d_head)
    return o.to(o_a.dtype), lse.squeeze(-1)


# --8<-- [end:merge_outputs]


def main() -> dict:
    torch.manual_seed(0)
    rows = []
    cases = {
        "N(0,1), 4x1000": torch.randn(4, 1000),
        "large magnitudes (±1e4)": torch.randn(4, 1000) * 1e4,
        "-inf entries (half masked)": torch.randn(4, 1000).masked_fill(
            torch.rand(4, 1000) < 0.5, float("-inf")
        ),
        "bf16 input, fp32 accumulation": (torch.randn(4, 1000) * 30).bfloat16(),
    }
    for name, x in cases.items():
        ours, ref = online_softmax(x, block_size=37), torch.softmax(x.float(), dim=-1)
        err = (ours.float() - ref).abs().max().item()
        tol = 1e-2 if x.dtype == torch.bfloat16 else 1e-6
        law(err <= tol, f"{name}: max |online - torch.softmax| = {err:.3g} > {tol}")
        rows.append({"input": name, "max_abs_err": err})

    masked = torch.full((2, 10), float("-inf"))
    ours, ref = online_softmax(masked), torch.softmax(masked, dim=-1)
    law(
        ours.isnan().all() and ref.isnan().all(),
        "a fully masked row must give NaN like torch.softmax",
    )
    rows.append({"input": "fully masked row", "max_abs_err": "NaN, as torch"})

    # Associativity: three pieces merged as (a·b)·c and a·(b·c) give the same state.
    x = torch.randn(3, 300) * 50
    a, b, c = (softmax_state(p) for p in x.split(100, dim=-1))
    left, right = merge(merge(a, b), c), merge(a, merge(b, c))
    law(
        torch.allclose(left.m, right.m),
        "merging is associative: the same running max either way",
    )
    law(
        torch.allclose(left.d, right.d, rtol=1e-6),
        "merging is associative: the same running sum either way",
    )
    whole = softmax_state(x)
    law(
        torch.allclose(left.d, whole.d, rtol=1e-5),
        "merged pieces must equal the whole row's state",
    )

    print0("online softmax (one pass, block 37) vs torch.softmax, max |error|:")
    for row in rows:
        err = row["max_abs_err"]
        print0(f"  {row['input']:<32} {err if isinstance(err, str) else f'{err:.2e}'}")
    print0("merge((a,b),c) == merge(a,(b,c)) == state of the whole row ✓")
    return {"tables": {"errors": rows}}


if __name__ == "__main__":
    raise SystemExit(main_entry(main, SPEC))
