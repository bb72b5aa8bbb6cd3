"""Ulysses attention against SDPA in fp64 on the whole sequence (GQA by SDPA's own
``enable_gqa``), forward and backward, causal and not, MHA and GQA, on 2 and 4 gloo
ranks (one launch each) and on two sub-groups at once; USP on a 2 × 2 grid of the 4
ranks, and on the transposed grid, against the same oracle at the positions
``usp_positions`` gives, whose layout is checked here by hand; the one-line refusals;
and the bytes Ulysses and the ring send, tallied at the Python API by this file's own
wrappers, against the module's formulas and its dispatch-level count."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
import torch
import torch.distributed as dist
import torch.nn.functional as F
from conftest import refused

from snippets.attention import ulysses as U
from snippets.attention.ring_attention import ring_attention
from snippets.core.errors import UsageError
from snippets.core.runtime import launch

F64 = torch.float64


def _shards(seed: int, shapes, rank: int, n: int) -> tuple[list, list]:
    """Full fp64 tensors of ``shapes`` (the same on every rank) and rank's rows."""
    g = torch.Generator().manual_seed(seed)
    full = [torch.randn(s, generator=g, dtype=F64) for s in shapes]
    return full, [t.narrow(2, rank * n, n) for t in full]


def _against_sdpa(seed, B, H, H_kv, n, d, causal, dtype, group=None) -> float:
    """Largest |error| over O, dQ, dK, dV on any rank of the group."""
    rank, p = dist.get_rank(group), dist.get_world_size(group)
    N = p * n
    full, mine = _shards(seed, [(B, H, N, d), *[(B, H_kv, N, d)] * 2, (B, H, N, d)],
                         rank, n)  # fmt: skip
    qkv = [t.to(dtype).requires_grad_() for t in mine[:3]]
    out = U.ulysses_attention(*qkv, group=group, causal=causal)
    assert out.shape == qkv[0].shape and out.dtype == dtype
    ours = [out, *torch.autograd.grad(out, qkv, mine[3].to(dtype))]
    # the oracle sees the same rounded inputs, computes in fp64, keeps every row
    ref_in = [t.to(dtype).to(F64).requires_grad_() for t in full[:3]]
    ref = F.scaled_dot_product_attention(*ref_in, is_causal=causal, enable_gqa=True)
    theirs = [ref, *torch.autograd.grad(ref, ref_in, full[3].to(dtype).to(F64))]
    worst = max(
        (a.to(F64) - b.narrow(2, rank * n, n)).abs().max().item()
        for a, b in zip(ours, theirs)
    )
    peak = torch.tensor(worst)
    dist.all_reduce(peak, op=dist.ReduceOp.MAX, group=group)
    return peak.item()


def _usp_against_sdpa(seed, B, H, H_kv, n, d, causal, grid) -> float:
    """USP on ``grid`` = (Ulysses group, ring group) vs SDPA in fp64 on the whole
    sequence, compared at this rank's positions; the largest |error| over O, dQ, dK,
    dV on any rank of the world."""
    u_group, r_group = grid
    u, r = dist.get_world_size(u_group), dist.get_world_size(r_group)
    N = r * u * n
    g = torch.Generator().manual_seed(seed)
    shapes = [(B, H, N, d), *[(B, H_kv, N, d)] * 2, (B, H, N, d)]
    full = [torch.randn(s, generator=g, dtype=F64) for s in shapes]
    at = U.usp_positions(
        N, dist.get_rank(r_group), r, dist.get_rank(u_group), u, causal
    )
    qkv = [t[:, :, at].requires_grad_() for t in full[:3]]
    out = U.usp_attention(*qkv, u_group, r_group, causal=causal)
    assert out.shape == qkv[0].shape
    ours = [out, *torch.autograd.grad(out, qkv, full[3][:, :, at])]
    ref_in = [t.clone().requires_grad_() for t in full[:3]]
    ref = F.scaled_dot_product_attention(*ref_in, is_causal=causal, enable_gqa=True)
    theirs = [ref, *torch.autograd.grad(ref, ref_in, full[3])]
    worst = max((a - b[:, :, at]).abs().max().item() for a, b in zip(ours, theirs))
    peak = torch.tensor(worst)
    dist.all_reduce(peak, op=dist.ReduceOp.MAX)
    return peak.item()


class Tally:
    """Bytes this rank hands to the two Python calls that move attention's data and
    that leave it: an all-to-all's equal blocks but its own, every isend's tensor."""

    def __init__(self, patch: pytest.MonkeyPatch) -> None:
        self.bytes = 0
        all_to_all, batch = dist.all_to_all_single, dist.batch_isend_irecv

        def counting_all_to_all(output, input, *args, group=None, **kwargs):
            assert not args and kwargs.get("input_split_sizes") is None  # equal
            p = dist.get_world_size(group)
            self.bytes += input.nbytes // p * (p - 1)
            return all_to_all(output, input, *args, group=group, **kwargs)

        def counting_batch(ops):
            self.bytes += sum(o.tensor.nbytes for o in ops if o.op is dist.isend)
            return batch(ops)

        patch.setattr(dist, "all_to_all_single", counting_all_to_all)
        patch.setattr(dist, "batch_isend_irecv", counting_batch)


def _traffic(method: str, B, H, H_kv, n, d, dtype) -> dict:
    """{phase: (tallied here, counted by U.Traffic, U.bytes_sent)} for one run."""
    rank, p = dist.get_rank(), dist.get_world_size()
    shapes = [(B, H, p * n, d), *[(B, H_kv, p * n, d)] * 2, (B, H, p * n, d)]
    _, mine = _shards(7, shapes, rank, n)
    q, k, v, dO = (t.to(dtype) for t in mine)
    attend = U.ulysses_attention if method == "ulysses" else ring_attention
    found = {}
    with pytest.MonkeyPatch.context() as patch:
        tally = Tally(patch)
        for phase in ("forward", "backward"):
            before = tally.bytes
            with U.Traffic() as traffic:
                if phase == "forward":
                    qkv = [t.requires_grad_() for t in (q, k, v)]
                    out = attend(*qkv)
                else:
                    torch.autograd.grad(out, qkv, dO)
            found[phase] = (tally.bytes - before, traffic.bytes)
    want = U.bytes_sent(method, B, H, H_kv, p * n, d, p, dtype.itemsize)
    return {phase: (*found[phase], want[phase]) for phase in found}


def _refusal(H: int, H_kv: int) -> str:
    x = torch.zeros(1, H, 2, 8)
    try:
        U.ulysses_attention(x, torch.zeros(1, H_kv, 2, 8), torch.zeros(1, H_kv, 2, 8))
    except UsageError as exc:
        return str(exc)
    return "no refusal"


def _usp_refusals(grid) -> list[str]:
    """USP with u = 2 and H_kv = 3, then a Ulysses size of 3 for 4 ranks: both must
    refuse before any rank sends (else the others would wait)."""
    q, kv = torch.zeros(1, 6, 2, 32), torch.zeros(1, 3, 2, 32)
    said = []
    for attempt in (lambda: U.usp_attention(q, kv, kv, *grid), lambda: U.usp_groups(3)):
        try:
            attempt()
        except UsageError as exc:
            said.append(str(exc))
        else:
            said.append("no refusal")
    return said


def _all_checks() -> dict:
    """Every case of one world size, in one launch."""
    p = dist.get_world_size()
    errors, usp = {}, None
    for causal in (False, True):
        for name, args, dtype, tol in (
            ("MHA fp64", (1, 4, 4, 5, 8), F64, 1e-12),
            ("GQA 8/4 fp64", (2, 8, 4, 3, 16), F64, 1e-12),
            ("GQA 12/4 fp32", (1, 12, 4, 7, 32), torch.float32, 1e-5),
            ("one row a rank", (1, 8, 4, 1, 8), F64, 1e-12),
        ):
            err = _against_sdpa(len(name), *args, causal, dtype)
            errors[f"{name} causal={causal}"] = (err, tol)
    if p == 4:  # two exchanges at once on sub-groups of non-neighbouring ranks
        pairs = [dist.new_group([0, 2], timeout=timedelta(seconds=60)),
                 dist.new_group([1, 3], timeout=timedelta(seconds=60))]  # fmt: skip
        mine = pairs[dist.get_rank() % 2]
        err = _against_sdpa(dist.get_rank() % 2, 1, 6, 2, 5, 8, True, F64, mine)
        errors["sub-group GQA 6/2"] = (err, 1e-12)
        grid = U.usp_groups(2)  # Ulysses {0, 1}, {2, 3}; rings {0, 2}, {1, 3}
        for causal in (False, True):
            for name, H, H_kv in (("MHA 4/4", 4, 4), ("GQA 6/2", 6, 2)):
                err = _usp_against_sdpa(H, 2, H, H_kv, 3, 32, causal, grid)
                errors[f"USP 2×2 {name} causal={causal}"] = (err, 1e-12)
        # the transposed grid: Ulysses on the pairs above, rings {0, 1}, {2, 3}
        rings = [dist.new_group([0, 1], timeout=timedelta(seconds=60)),
                 dist.new_group([2, 3], timeout=timedelta(seconds=60))]  # fmt: skip
        transposed = (mine, rings[dist.get_rank() // 2])
        err = _usp_against_sdpa(9, 1, 6, 2, 1, 32, True, transposed)
        errors["USP transposed GQA 6/2 causal, one row a rank"] = (err, 1e-12)
        usp = {
            "grid": [dist.get_process_group_ranks(g) for g in grid],
            "refusals": _usp_refusals(grid),
        }
    traffic = {
        f"{m} {H}/{H_kv} {dtype}": _traffic(m, 2, H, H_kv, 3, 32, dtype)
        for m, H, H_kv, dtype in (
            ("ulysses", 8, 8, torch.float32),
            ("ulysses", 8, 4, torch.bfloat16),
            ("ulysses", 12, 4, F64),
            ("ring", 4, 4, torch.float32),
            ("ring", 4, 4, torch.bfloat16),  # its dK, dV travel in fp32
            ("ring", 4, 4, F64),
        )
    }
    H, H_kv = {2: (6, 3), 4: (8, 2)}[p]  # p does not divide H_kv; then H_kv ∤ H
    refusals = [_refusal(H, H_kv), _refusal(6, 4)]
    result = U.main(rows=5, heads=8, kv_heads=4, head_dim=32)
    return {"errors": errors, "traffic": traffic, "refusals": refusals,
            "main": result, "usp": usp}  # fmt: skip


@pytest.fixture(scope="module", params=[2, 4])
def checked(request) -> tuple[int, list[dict]]:
    return request.param, launch(_all_checks, request.param, "gloo", 120)


def test_equals_sdpa_forward_and_backward(checked) -> None:
    p, results = checked
    for name, (err, tol) in results[0]["errors"].items():
        assert err <= tol, f"{p} ranks, {name}: max error {err:.3g} > {tol}"


def test_bytes_at_the_calls_equal_the_formulas(checked) -> None:
    p, results = checked
    for rank, r in enumerate(results):
        for case, phases in r["traffic"].items():
            for phase, (tallied, traffic, formula) in phases.items():
                assert tallied == traffic == formula, (p, rank, case, phase)
                assert formula > 0, (case, phase)  # p > 1: something moved


def test_p_must_divide_the_kv_heads(checked) -> None:
    p, results = checked
    divides, multiple = results[0]["refusals"]
    H_kv = {2: 3, 4: 2}[p]
    assert f"p = {p} ranks must divide H_kv = {H_kv}" in divides
    assert "\n" not in divides
    assert "not a multiple of H_kv = 4" in multiple and "\n" not in multiple


def test_usp_groups_and_refusals(checked) -> None:
    p, results = checked
    if p != 4:
        pytest.skip("USP's 2 × 2 grid needs 4 ranks")
    for rank, r in enumerate(results):  # rank = ring rank · 2 + Ulysses rank
        ulysses, ring = [rank - rank % 2, rank - rank % 2 + 1], [rank % 2, rank % 2 + 2]
        assert r["usp"]["grid"] == [ulysses, ring], rank
    heads, groups = results[0]["usp"]["refusals"]
    assert "u = 2 ranks must divide H_kv = 3" in heads and "\n" not in heads
    assert "u = 3 must divide the p = 4 ranks" in groups and "\n" not in groups


@pytest.mark.parametrize(
    "r,u,causal,held",
    [(2, 2, False, [[0, 1], [2, 3], [4, 5], [6, 7]]),
     # causal: ring rank 0 holds zig-zag chunks 0 and 3 of 4, [0, 1, 6, 7], and its
     # two Ulysses ranks one each; ring rank 1 holds chunks 1 and 2
     (2, 2, True, [[0, 1], [6, 7], [2, 3], [4, 5]]),
     (2, 4, True, [[0], [1], [6], [7], [2], [3], [4], [5]]),
     (4, 1, True, [[0, 7], [1, 6], [2, 5], [3, 4]]),
     (1, 4, True, [[0, 1], [2, 3], [4, 5], [6, 7]])],
)  # fmt: skip
def test_usp_positions_by_hand(r, u, causal, held) -> None:
    """Rank g = ring_rank·u + Ulysses rank, as ``usp_groups`` numbers them; N = 8."""
    got = [
        U.usp_positions(8, g // u, r, g % u, u, causal).tolist() for g in range(r * u)
    ]
    assert got == held


def test_usp_positions_refuse_a_length_the_grid_cannot_cut() -> None:
    with pytest.raises(ValueError, match=re.escape("2 × 3 grid needs r·u | N")):
        U.usp_positions(10, 0, 2, 0, 3, False)
    with pytest.raises(ValueError, match="got N = 6"):
        U.usp_positions(6, 0, 2, 0, 3, True)  # r·u = 6 | 6, but 2r = 4 does not


def test_main_reports_errors_and_bytes(checked) -> None:
    p, results = checked
    tables = results[0]["main"]["tables"]
    assert [(r["heads"], r["causal"]) for r in tables["errors"]] == [
        (h, c) for h in ("MHA 8/8", "GQA 8/4") for c in (False, True)
    ]
    if p == 4:
        assert [(r["r × u"], r["heads"], r["causal"]) for r in tables["usp"]] == [
            ("2 × 2", "GQA 8/4", c) for c in (False, True)
        ]
    else:
        assert "usp" not in tables
    marks = [(r["method"], r["counted at the calls"]) for r in tables["bytes"]]
    assert marks == [("ulysses", "= formula ✓"), ("ring", "= formula ✓"),
                     ("ulysses", "= formula ✓"), ("ring", "—")]  # fmt: skip


def test_one_rank_sends_nothing() -> None:
    for method in ("ulysses", "ring"):
        assert U.bytes_sent(method, 2, 8, 2, 10, 16, 1, 4) == {
            "forward": 0,
            "backward": 0,
        }
    with pytest.raises(ValueError, match="'ulysses' or 'ring'"):
        U.bytes_sent("tree", 1, 1, 1, 1, 1, 1, 4)


@pytest.mark.parametrize(
    "args,words",
    [(["-n", "4", "--kv-heads", "2"], "p = 4 ranks must divide H_kv = 2"),
     (["-n", "3"], "p = 3 ranks must divide H_kv = 4"),
     (["--heads", "6"], "H = 6 query heads are not a multiple of H_kv = 4"),
     (["--kv-heads", "0"], "--kv-heads: must be at least 1"),
     (["--head-dim", "20"], "multiple of 8")],
)  # fmt: skip
def test_the_command_line_refuses_in_one_line(args, words, capfd) -> None:
    assert words in refused(["run", "ulysses", *args], capfd)
