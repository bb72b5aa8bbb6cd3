"""Online softmax equals torch.softmax; its merge is associative and commutative,
with an identity."""

from __future__ import annotations

import pytest
import torch

from snippets.attention import online_softmax as osm


@pytest.mark.parametrize("block_size", [1, 7, 64, 1000])
@pytest.mark.parametrize("dim", [-1, 0, 1])
def test_equals_torch_softmax(block_size: int, dim: int) -> None:
    torch.manual_seed(block_size)
    x = torch.randn(5, 131, 3, dtype=torch.float64) * 3  # odd sizes on every dim
    torch.testing.assert_close(
        osm.online_softmax(x, dim=dim, block_size=block_size),
        torch.softmax(x, dim=dim),
        rtol=1e-12,
        atol=1e-12,
    )


@pytest.mark.parametrize("magnitude", [1e2, 1e4, 1e30])
def test_large_magnitudes_do_not_overflow(magnitude: float) -> None:
    x = (
        torch.randn(4, 257) * magnitude
    )  # exp(1e4) overflows fp32 without the running max
    ours, ref = osm.online_softmax(x, block_size=16), torch.softmax(x, dim=-1)
    assert torch.isfinite(ours).all()
    torch.testing.assert_close(ours, ref, rtol=1e-5, atol=1e-6)


def test_minus_inf_entries_and_masked_first_blocks() -> None:
    x = torch.randn(6, 100)
    x[:, :50] = float("-inf")  # the first blocks of every row see nothing but -inf
    x[1, 70:] = float("-inf")
    x[2, ::3] = float("-inf")
    torch.testing.assert_close(
        osm.online_softmax(x, block_size=8), torch.softmax(x, dim=-1)
    )


def test_fully_masked_row_is_nan_like_torch() -> None:
    x = torch.randn(3, 20)
    x[1] = float("-inf")
    ours, ref = osm.online_softmax(x, block_size=4), torch.softmax(x, dim=-1)
    assert ref[1].isnan().all() and ours[1].isnan().all()
    torch.testing.assert_close(ours[[0, 2]], ref[[0, 2]])
    m, d = osm.online_softmax_state(x, block_size=4)  # the state itself stays NaN-free
    assert not m.isnan().any() and not d.isnan().any() and d[1].item() == 0


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_inputs_accumulate_in_fp32(dtype: torch.dtype) -> None:
    torch.manual_seed(1)
    x = (torch.randn(8, 4099) * 20).to(
        dtype
    )  # long rows: a half-precision sum would drift
    ours = osm.online_softmax(x, block_size=33)
    assert ours.dtype == dtype
    ref = torch.softmax(x.double(), dim=-1)
    # Only the final rounding to the half type may differ from the exact answer.
    torch.testing.assert_close(
        ours.double(), ref, rtol=2**-7, atol=2**-14 if dtype == torch.float16 else 1e-6
    )
    m, d = osm.online_softmax_state(x)
    assert d.dtype == torch.float32
    torch.testing.assert_close(
        d.double(),
        torch.exp(x.double() - m.double()).sum(-1, keepdim=True),
        rtol=1e-5,
        atol=0,
    )


def _random_state(rows: int, seed: int) -> osm.SoftmaxState:
    g = torch.Generator().manual_seed(seed)
    return osm.softmax_state(torch.randn(rows, 17, generator=g) * 40)


def test_merge_associative_commutative_identity() -> None:
    a, b, c = (_random_state(9, s) for s in range(3))
    left, right = osm.merge(osm.merge(a, b), c), osm.merge(a, osm.merge(b, c))
    torch.testing.assert_close(left.m, right.m)
    torch.testing.assert_close(left.d, right.d)
    swapped = osm.merge(b, a)
    torch.testing.assert_close(osm.merge(a, b).d, swapped.d)
    empty = osm.SoftmaxState(torch.full((9, 1), float("-inf")), torch.zeros(9, 1))
    same = osm.merge(empty, a)
    torch.testing.assert_close(same.m, a.m)
    torch.testing.assert_close(same.d, a.d)
    both_empty = osm.merge(empty, empty)
    assert torch.isneginf(both_empty.m).all() and (both_empty.d == 0).all()


def test_merged_pieces_equal_whole_row_in_any_order() -> None:
    x = torch.randn(4, 90, dtype=torch.float64) * 10
    pieces = [osm.softmax_state(p) for p in x.split([13, 40, 1, 36], dim=-1)]
    whole = osm.softmax_state(x)
    for order in ([0, 1, 2, 3], [3, 1, 0, 2]):
        s = pieces[order[0]]
        for i in order[1:]:
            s = osm.merge(s, pieces[i])
        torch.testing.assert_close(s.m, whole.m)
        # d relative to m: exactly Σ exp(x - max)
        torch.testing.assert_close(
            s.d,
            torch.exp(x - x.amax(-1, keepdim=True)).sum(-1, keepdim=True),
            rtol=1e-12,
            atol=0,
        )


def test_merge_outputs_equals_attention_over_all_keys() -> None:
    torch.manual_seed(2)
    s = torch.randn(2, 3, 11, 29) * 5  # scores (B, H, N, M), split over keys
    v = torch.randn(2, 3, 29, 8)
    ref = torch.softmax(s, -1) @ v

    def partial(cols: slice) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.softmax(s[..., cols], -1) @ v[:, :, cols], torch.logsumexp(
            s[..., cols], -1
        )

    o, lse = osm.merge_outputs(*partial(slice(0, 10)), *partial(slice(10, 29)))
    torch.testing.assert_close(o, ref, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(lse, torch.logsumexp(s, -1))
    # a partial that saw no key (lse = -inf) contributes nothing
    o2, lse2 = osm.merge_outputs(
        torch.zeros_like(ref), torch.full_like(lse, float("-inf")), ref, lse
    )
    torch.testing.assert_close(o2, ref)
    torch.testing.assert_close(lse2, lse)


def test_bad_input() -> None:
    with pytest.raises(TypeError, match="floating-point"):
        osm.online_softmax(torch.arange(5))
    with pytest.raises(ValueError, match="block_size"):
        osm.online_softmax(torch.randn(5), block_size=0)


def test_main_checks_itself() -> None:
    result = osm.main()
    assert {row["input"] for row in result["tables"]["errors"]} >= {"fully masked row"}
