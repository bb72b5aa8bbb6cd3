"""Exercises of "Attention, tiled": the online-softmax merge, FlashAttention's forward
loop, and ring attention's forward over ranks.

Inputs are fp64, so the oracles (``torch.softmax`` and ``torch.logsumexp`` over the
whole row, ``F.scaled_dot_product_attention`` over the whole sequence) leave room only
for rounding: a tolerance of 1e-9 catches every known mistake by many orders of
magnitude. The grader computes each oracle outside the reader's code.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

from snippets.attention.flash_algorithms import flash_forward
from snippets.attention.online_softmax import merge, softmax_state
from snippets.attention.ring_attention import ring_forward
from snippets.attention.zigzag_layout import zigzag_shard
from snippets.exercises.engine import Case, Exercise, Grade, LiveBytes

TOL = {"atol": 1e-9, "rtol": 1e-9}
NEG_INF = float("-inf")


def normals(shape: tuple[int, ...], seed: int, scale: float = 1.0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=g, dtype=torch.float64) * scale


def pair(case: Case, got, what: str) -> tuple[torch.Tensor, torch.Tensor] | None:
    """The two tensors of a result that should be a pair, or None (and a failure)."""
    ok = isinstance(got, (tuple, list)) and len(got) == 2
    if ok and all(isinstance(t, torch.Tensor) for t in got):
        return got[0], got[1]
    case.fail(f"it returned {type(got).__name__}; the contract is {what}")
    return None


# --- online_softmax_merge ------------------------------------------------------------


def merge_cases() -> list[tuple[str, torch.Tensor, int]]:
    """(title, rows, where piece a ends): every way the two maxima can sit."""
    x = normals((6, 13), seed=1, scale=3)
    big = normals((4, 9), seed=2, scale=1e4)  # exp without the shift overflows
    older_wins, newer_wins = x.clone(), x.clone()
    older_wins[:, :5] += 20  # the first piece holds every row's max
    newer_wins[:, 5:] += 20  # the second one does
    masked = normals((5, 11), seed=3)
    masked[0] = NEG_INF  # a fully masked row: both pieces empty
    masked[1, :4] = NEG_INF  # piece a empty
    masked[2, 4:] = NEG_INF  # piece b empty
    masked[3, ::2] = NEG_INF  # some masked entries on each side
    return [
        ("maxima on both sides, 13 columns split 5 + 8", x, 5),
        ("the newer piece holds the larger max", newer_wins, 5),
        ("the older piece holds the larger max", older_wins, 5),
        ("magnitudes of 1e4 (exp overflows unshifted)", big, 4),
        ("a piece of one column", x, 1),
        ("-inf entries: masked rows and a whole masked piece", masked, 4),
    ]


def check_online_softmax_merge(fn, grade: Grade) -> None:
    for title, x, cut in merge_cases():
        with grade.case(title) as case:
            a, b = softmax_state(x[:, :cut]), softmax_state(x[:, cut:])
            got = pair(case, case.call(fn, a, b), "SoftmaxState(m, d)")
            if got is None:
                continue
            m, d = got
            # the oracle: the whole row at once
            want_m = x.amax(-1, keepdim=True)
            lse = torch.logsumexp(x, -1, keepdim=True)
            want_d = torch.where(torch.isneginf(lse), 0.0, torch.exp(lse - want_m))
            safe = torch.where(torch.isneginf(want_m), 0.0, want_m)
            older = a.d + b.d * torch.exp(b.m - safe)  # a's sum kept at a's max
            newer = a.d * torch.exp(a.m - safe) + b.d
            nan = (
                lambda t: bool(t.isnan().any()),
                "NaN where a row is all -inf: exp(-inf - (-inf)) is NaN; subtract 0 "
                "where the max is -inf (the state (-inf, 0) is the merge's identity)",
            )
            if not case.equal(m, want_m, "m", **TOL, mistakes=(nan,)):
                continue
            case.equal(
                d,
                want_d,
                "d",
                **TOL,
                mistakes=(
                    nan,
                    (
                        older,
                        "the older sum d_a is not rescaled by exp(m_a - m_new)",
                    ),
                    (a.d + b.d, "d = d_a + d_b: each sum is relative to its own max"),
                    (newer, "d_b is not rescaled by exp(m_b - m_new): both sides are"),
                ),
            )
            # and the softmax the merged state gives is torch.softmax's
            y = torch.exp(x - torch.where(torch.isneginf(m), 0.0, m)) / d
            case.equal(y, torch.softmax(x, -1), "exp(x - m) / d", **TOL)


# --- flash_forward -------------------------------------------------------------------


class Watch(TorchFunctionMode):
    """Records every tensor an attention call makes: the biggest, and any call of
    torch's own attention."""

    def __init__(self) -> None:
        super().__init__()
        self.biggest: tuple[int, ...] = ()
        self.fused = False

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func is F.scaled_dot_product_attention:
            self.fused = True
        out = func(*args, **(kwargs or {}))
        for t in out if isinstance(out, (tuple, list)) else (out,):
            if isinstance(t, torch.Tensor) and t.numel() > math.prod(self.biggest):
                self.biggest = tuple(t.shape)
        return out


def watched(fn):
    """``fn`` run inside a :class:`Watch`; the watch is the wrapper's attribute."""

    def run(*args):
        with run.watch:
            return fn(*args)

    run.watch = Watch()
    return run


def attention_oracle(q, k, v, causal: bool, offset: int = 0):
    """SDPA's output, the log-sum-exp and the max of each row's scaled scores, where
    key j is visible to query i when j <= i + offset (offset 0 is SDPA's is_causal)."""
    N, M = q.shape[2], k.shape[2]
    s = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    if causal:
        keep = torch.ones(N, M, dtype=torch.bool).tril(offset)
        s = s.masked_fill(~keep, NEG_INF)
        O = F.scaled_dot_product_attention(q, k, v, attn_mask=keep)
    else:
        O = F.scaled_dot_product_attention(q, k, v)
    return O, torch.logsumexp(s, -1), s.amax(-1)


FLASH_CASES = (  # N, M, block_q, block_k, causal
    (32, 1024, 32, 8, False),  # 128 key tiles: one row block's scores outweigh K, V
    (37, 37, 16, 8, False),
    (37, 37, 16, 8, True),
    (29, 45, 8, 16, False),  # more keys than queries, neither a multiple of a tile
    (7, 7, 1, 1, True),  # one query, one key per tile
    (33, 33, 7, 5, True),  # tiles that cross the diagonal unevenly
    (5, 5, 256, 512, True),  # one tile larger than the sequence
)


def check_flash_forward(fn, grade: Grade) -> None:
    d = 8
    for i, (N, M, bq, bk, causal) in enumerate(FLASH_CASES):
        mask = "causal" if causal else "no mask"
        with grade.case(f"N={N}, M={M}, tiles {bq}x{bk}, {mask}") as case:
            q = normals((2, 3, N, d), seed=10 * i)
            k, v = normals((2, 3, M, d), 10 * i + 1), normals((2, 3, M, d), 10 * i + 2)
            run = watched(fn)
            live = LiveBytes(q, k, v)
            with live:
                got = case.call(run, q, k, v, causal, None, bq, bk)
            got = pair(case, got, "(O, L)")
            if got is None:
                continue
            O, L = got
            want_O, want_L, rowmax = attention_oracle(q, k, v, causal)
            unnormalised = want_O * torch.exp(want_L - rowmax)[..., None]
            off = []
            for offset, hint in (
                (-1, "the diagonal is masked: key j = i is visible (mask k > q)"),
                (1, "key i + 1 is visible: mask every key k > q"),
            ):
                wrong = attention_oracle(q, k, v, True, offset)[0]
                rows = torch.arange(N) + offset >= 0  # the rows that see a key
                off.append((lambda t, w=wrong, r=rows: _same_rows(t, w, r), hint))
            case.equal(
                O,
                want_O,
                "O",
                **TOL,
                mistakes=(
                    (unnormalised, "O is not divided by the row sum l at the end"),
                    *(off if causal else ()),
                ),
            )
            case.equal(
                L,
                want_L,
                "L",
                **TOL,
                mistakes=(
                    (rowmax, "L = m: the log-sum-exp is m + log l"),
                    (want_L - rowmax, "L = log l: the log-sum-exp is m + log l"),
                ),
            )
            case.expect(
                not run.watch.fused,
                "it calls F.scaled_dot_product_attention, the oracle: build the "
                "loop over tiles yourself",
            )
            most = 2 * 3 * max(N * d, M * d, bq * bk)  # q, k, v, O, or a tile
            if N * M * 2 * 3 > most:  # the whole score matrix would be bigger
                case.expect(
                    math.prod(run.watch.biggest) <= most,
                    f"it builds a tensor of shape {run.watch.biggest}: the whole "
                    f"{N}x{M} score matrix? A tile holds {bq}x{bk} scores",
                )
            memory_contract(case, live.peak, q, k, bq, bk)  # after: it says less


def memory_contract(case: Case, peak: int, q, k, bq: int, bk: int) -> None:
    """The most bytes the call held at once, against what the contract allows: a copy
    of each of q, k and v, O and L, a row block's state (a few block_q x d tensors) and
    a few tiles of scores (S, P, and one in the making), never a row of tiles."""
    B, H, N, d = q.shape
    M, size = k.shape[2], q.element_size()
    br, bc = min(bq, N), min(bk, M)
    allowed = size * B * H * (N * d + 2 * M * d + N * d + N + 8 * br * d + 4 * br * bc)
    if peak <= allowed:
        return
    tile = size * B * H * br * bc
    case.fail(
        f"it held {peak} bytes at once, {allowed} allowed: about "
        f"{(peak - allowed) // tile} score tiles of {br}x{bc} too many, where the "
        "contract holds one at a time",
        "hint: keep a running max m and sum l, and drop each tile once it is added",
    )


def _same_rows(got: torch.Tensor, wrong: torch.Tensor, rows: torch.Tensor) -> bool:
    """``got`` matches ``wrong`` on ``rows``, the queries that mistake leaves a key."""
    a, b = got[:, :, rows], wrong[:, :, rows]
    return bool(torch.allclose(a, b, rtol=1e-6, atol=1e-9))


# --- ring_forward --------------------------------------------------------------------


def check_ring_forward(fn, grade: Grade) -> None:
    rank, p = grade.rank, grade.world_size
    B, H, d, chunk = 1, 2, 8, 3  # chunk rows: n = 2 · chunk per rank, N = 2p · chunk
    N = 2 * p * chunk
    for causal in (False, True):
        title = f"N={N} over {p} ranks, {'causal, zig-zag' if causal else 'no mask'}"
        with grade.case(title) as case:
            q, k, v = (normals((B, H, N, d), seed=s + 7 * causal) for s in range(3))
            mine = [zigzag_shard(t, rank, p) for t in (q, k, v)]
            got = pair(case, case.call(fn, *mine, causal, None), "(O, L)")
            block = sum(t.numel() * t.element_size() for t in mine[1:])  # K and V
            held = case.received_peak
            case.expect(  # a third: the block a finished send's handle still holds
                held <= 3 * block,
                f"it kept {held / block:g} blocks of received K and V alive at once; "
                "the contract allows two, the one in use and the one arriving (and "
                "one a finished send's handle holds)",
                "hint: once a block has been merged in, let it go",
            )
            if got is None:
                continue
            O, L = got
            # the oracle: SDPA over the whole sequence, this rank's rows of it
            want_O, want_L, _ = attention_oracle(q, k, v, causal)
            want_O = zigzag_shard(want_O, rank, p)
            want_L = zigzag_shard(want_L, rank, p)
            # a ring that stops one hop short never sees the last visitor's keys
            last = (rank + 1) % p
            keep = torch.ones(N, dtype=torch.bool)
            keep[zigzag_shard(torch.arange(N)[None, None], last, p)[0, 0]] = False
            short = F.scaled_dot_product_attention(q, k[:, :, keep], v[:, :, keep])
            case.equal(
                O,
                want_O,
                "O",
                **TOL,
                mistakes=(
                    (
                        zigzag_shard(short, rank, p),
                        f"the keys of rank {last} are missing: p steps, p blocks "
                        "(the last one arrives after p - 1 hops)",
                    ),
                ),
            )
            case.equal(L, want_L, "L", **TOL)
        sends = [c for c in case.calls if c.kind in ("send", "isend")]
        recvs = [c for c in case.calls if c.kind in ("recv", "irecv")]
        right, left = (rank + 1) % p, (rank - 1) % p
        with grade.case(f"K and V go right, p-1 = {p - 1} hops ({title})") as c2:
            c2.expect(
                all(c.peer == right for c in sends)
                and all(c.peer == left for c in recvs),
                f"rank {rank} sends to or receives from others than rank {right} "
                f"(right) and rank {left} (left)",
                *(f"call: {c}" for c in sends + recvs if c.peer not in (left, right)),
                "hint: step t holds rank (r - t)'s keys; they come from the left",
            )
            values = sum(c.numel for c in sends)
            kv = 2 * B * H * 2 * chunk * d
            c2.expect(
                values == (p - 1) * kv,
                f"it sent {values} values; K and V, {p - 1} times, are {(p - 1) * kv}",
                "hint: after p - 1 hops every rank has seen every block",
            )


CHECKS = [
    Exercise(
        name="online_softmax_merge", function=merge, check=check_online_softmax_merge
    ),
    Exercise(name="flash_forward", function=flash_forward, check=check_flash_forward),
    Exercise(
        name="ring_attention_forward",
        function=ring_forward,
        check=check_ring_forward,
        world_sizes=(5, 3),
        point_to_point=True,
    ),
]
