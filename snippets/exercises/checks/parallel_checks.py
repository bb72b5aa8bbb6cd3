"""Exercises of "Distributed training, by hand": data, sharded and tensor parallelism.

Each check runs on every rank and holds the reader's function to an oracle computed
without it: the tiny GPT's gradient (or its SGD training) in one process on the whole
batch, a dense ``nn.Linear``, ``F.cross_entropy`` on the gathered logits. Everything is
float64; the tensor-parallel layers use small integers, so their sums are exact in any
order and compare bit for bit.
"""

from __future__ import annotations

import copy
import functools
from types import ModuleType
from typing import Callable

import torch
import torch.nn as nn
import torch.nn.functional as F

from snippets.exercises.engine import Case, Exercise, Grade
from snippets.models.tiny_gpt import GPT, GPTConfig, random_batch
from snippets.parallel.data.ddp import DDP, accumulate, average_bucket
from snippets.parallel.data.ddp_buckets import assign_buckets
from snippets.parallel.sharded.zero import zero1_step
from snippets.parallel.tensor.tensor_parallel import column_parallel, row_parallel
from snippets.parallel.tensor.vocab_parallel import vocab_parallel_cross_entropy

CFG = GPTConfig(vocab_size=16, block_size=7, n_layer=1, n_head=2, n_embd=16)
CAP_MB = 0.01  # the tiny GPT's 29 KiB of fp64 gradients fall into 2 buckets
TOL = {"rtol": 1e-9, "atol": 1e-12}  # fp64: a mean of means against one mean


def gpt() -> nn.Module:
    return GPT(CFG, seed=0).double()


def gradients(model: nn.Module, idx: torch.Tensor, targets: torch.Tensor) -> dict:
    """∇ of the mean loss over these rows, one process: the oracle."""
    model.zero_grad(set_to_none=True)
    model(idx, targets)[1].backward()
    return {n: t.grad.detach().clone() for n, t in model.named_parameters()}


def integers(shape: tuple[int, ...], seed: int, high: int = 4) -> torch.Tensor:
    """Small integers in float64: every product and sum here is exact."""
    g = torch.Generator().manual_seed(seed)
    return torch.randint(-high, high + 1, shape, generator=g).to(torch.float64)


def hinted(fn: Callable, *hints: tuple[str, str]) -> Callable:
    """``fn``, whose RuntimeError gets a hint appended where its message says
    something known (``(text in the message, hint)``); the reader's traceback stays."""

    @functools.wraps(fn)
    def call(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except RuntimeError as exc:
            text = str(exc).splitlines()[0] if str(exc) else ""
            for known, hint in hints:
                if known in text:
                    exc.args = (f"{text[:90]}; hint: {hint}",)
            raise

    return call


# --- ddp_bucket_hook ---------------------------------------------------------------


def check_average_bucket(fn, grade: Grade) -> None:
    rank, p = grade.rank, grade.world_size
    idx, targets = random_batch(CFG, 3 * p)  # 3 sequences of 7 tokens on each rank
    expected = gradients(gpt(), idx, targets)
    model = gpt()
    names = {id(t): n for n, t in model.named_parameters()}
    mine = gradients(model, idx.tensor_split(p)[rank], targets.tensor_split(p)[rank])
    params = list(model.parameters())
    before = {n: t.detach().clone() for n, t in model.named_parameters()}
    buckets = assign_buckets(params, CAP_MB)
    for b, bucket in enumerate(buckets):
        tensors = [params[i] for i in bucket]
        numel = sum(t.numel() for t in tensors)
        with grade.case(
            f"bucket {b}: {len(tensors)} gradients, {numel} values"
        ) as case:
            case.call(fn, tensors)
            for t in tensors:
                if not case.expect(
                    torch.equal(t.detach(), before[names[id(t)]]),
                    f"the parameter {names[id(t)]} changed",
                    "hint: average each parameter's .grad; the parameter stays as is",
                ):
                    break
            for t in tensors:
                name = names[id(t)]
                case.equal(
                    t.grad,
                    expected[name],
                    f"{name}.grad",
                    **TOL,
                    mistakes=(
                        (
                            mine[name],
                            "each .grad is still this rank's own: nothing was "
                            "averaged (the parameter, perhaps, instead of its .grad?)",
                        ),
                        (
                            p * expected[name],
                            "each .grad is the sum over the ranks: divide it by p",
                        ),
                    ),
                )
            reduces = [c for c in case.calls if c.kind == "all_reduce"]
            case.expect(
                len(reduces) == 1 and reduces[0].numel == numel,
                f"it made {len(reduces)} all-reduces for the bucket "
                f"({', '.join(str(c.numel) for c in reduces) or 'none'} values); "
                f"a bucket travels as one flat tensor of {numel} in one all-reduce",
            )


# --- accumulate_loss_scale ---------------------------------------------------------


def check_accumulate(fn, grade: Grade) -> None:
    rank, p = grade.rank, grade.world_size
    for k in (3, 1):
        idx, targets = random_batch(CFG, 2 * k * p, seed=k)  # micro-batch j, rank r
        micro = [
            (i.tensor_split(p)[rank], t.tensor_split(p)[rank])
            for i, t in zip(idx.tensor_split(k), targets.tensor_split(k))
        ]
        expected = gradients(gpt(), idx, targets)
        rows = [torch.cat(x) for x in zip(*micro)]  # this rank's 2k sequences
        mine = gradients(gpt(), *rows)
        model = DDP(gpt(), bucket_cap_mb=CAP_MB)
        title = f"{k} micro-batch{'es' if k > 1 else ''} of 2 sequences on each rank"
        with grade.case(title) as case:
            case.call(fn, model, micro)
            for name, t in model.module.named_parameters():
                if not case.equal(
                    t.grad,
                    expected[name],
                    f"{name}.grad",
                    **TOL,
                    mistakes=(
                        (
                            k * expected[name],
                            f"the gradient is k = {k} times too big: divide each "
                            "micro-batch's loss by k",
                        ),
                        (
                            expected[name] / p,
                            "the gradient is p times too small: DDP already "
                            "averages over the ranks; divide the loss by k only",
                        ),
                        (
                            mine[name],
                            "the gradient is this rank's own: the last micro-batch's "
                            "backward runs outside no_sync(), so DDP averages it",
                        ),
                    ),
                ):
                    break
            reduces = [c for c in case.calls if c.kind == "all_reduce"]
            case.expect(
                len(reduces) == len(model.buckets),
                f"{len(reduces)} all-reduces for {k} micro-batches; one backward "
                f"syncs, in {len(model.buckets)} (one per bucket)",
                "hint: the backward of every micro-batch but the last runs under "
                "model.no_sync()",
            )


# --- zero1_step --------------------------------------------------------------------

LR, MOMENTUM, STEPS = 0.1, 0.9, 3


def train_single(data: list, lr: float) -> list[dict]:
    """SGD with momentum, one process, the whole batch: the parameters after each
    step."""
    model = gpt()
    optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=MOMENTUM)
    after = []
    for idx, targets in data:
        optimizer.zero_grad()
        model(idx, targets)[1].backward()
        optimizer.step()
        after.append({n: t.detach().clone() for n, t in model.named_parameters()})
    return after


def held_values(state: dict, params: list[torch.Tensor]) -> int:
    """Values in the distinct storages of the tensors ``state`` holds, through dicts,
    lists and objects; a torch optimizer counts by its ``.state``. Left out: 0-d
    tensors (step counters) and the storages of the parameters and of an optimizer's
    own parameters (this rank's chunks, which may be views of them)."""
    mine = {t.untyped_storage().data_ptr() for t in params}
    found: dict[int, int] = {}
    stack: list = [state]
    seen: set[int] = set()
    while stack:
        obj = stack.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        if isinstance(obj, torch.Tensor):
            storage = obj.untyped_storage()
            if obj.dim() and storage.data_ptr() not in mine:
                found[storage.data_ptr()] = storage.nbytes() // obj.element_size()
        elif isinstance(obj, torch.optim.Optimizer):
            for group in obj.param_groups:
                mine |= {t.untyped_storage().data_ptr() for t in group["params"]}
            stack.extend(obj.state.values())
        elif isinstance(obj, dict):
            stack.extend(obj.values())
        elif isinstance(obj, (list, tuple, set)):
            stack.extend(obj)
        elif hasattr(obj, "__dict__") and not isinstance(obj, (type, ModuleType)):
            stack.extend(vars(obj).values())
    return sum(found.values())


def check_zero1(fn, grade: Grade) -> None:
    rank, p = grade.rank, grade.world_size
    data = random_batch(CFG, 3 * p, steps=STEPS)
    oracle = train_single(data, LR)
    twice, summed = train_single(data, LR / p), train_single(data, LR * p)
    model = gpt()
    params = list(model.parameters())
    state: dict = {}
    for step, (idx, targets) in enumerate(data):
        with grade.case(f"step {step + 1}: SGD with momentum, {p} ranks") as case:
            model.zero_grad(set_to_none=True)
            model(idx.tensor_split(p)[rank], targets.tensor_split(p)[rank])[
                1
            ].backward()
            before = {n: t.detach().clone() for n, t in model.named_parameters()}
            case.call(fn, params, state, LR, MOMENTUM)
            for name, t in model.named_parameters():
                new, old = oracle[step][name], before[name]
                if not case.equal(
                    t.detach(),
                    new,
                    name,
                    **TOL,
                    mistakes=(
                        (
                            lambda got, new=new, old=old: bool(
                                (torch.isclose(got, new, **TOL) | (got == old)).all()
                            ),
                            "part of the parameter kept its old values: after each "
                            "rank steps its shard, all-gather the shards",
                        ),
                        (
                            twice[step][name],
                            "the step is p times too small: the gradient was "
                            "averaged twice (÷ p once is the mean)",
                        ),
                        (
                            summed[step][name],
                            "the step is p times too big: the gradients were summed "
                            "over the ranks, not averaged",
                        ),
                    ),
                ):
                    break
            limit = sum(-(-t.numel() // p) for t in params)  # ⌈n/p⌉ each
            held = held_values(state, params)
            case.expect(
                held <= limit,
                f"state holds {held} values of optimizer state on this rank; ZeRO-1 "
                f"keeps only this rank's shard of the momentum, at most {limit}",
                f"hint: all {sum(t.numel() for t in params)} parameters are stepped "
                "on every rank; step only this rank's shard",
            )


# --- column_parallel and row_parallel ----------------------------------------------

WRONG_SHAPES = (
    "shapes cannot be multiplied",
    "torch keeps a Linear's weight as (out, in): cut it on the right dimension",
)


def dense(k: int, n: int, seed: int) -> nn.Linear:
    linear = nn.Linear(k, n).double()
    with torch.no_grad():
        linear.weight.copy_(integers((n, k), seed))
        linear.bias.copy_(integers((n,), seed + 1))
    return linear


def leaf(x: torch.Tensor) -> torch.Tensor:
    return x.detach().clone().requires_grad_(True)


def backward_through(case: Case, y, dy: torch.Tensor) -> bool:
    """Backward from the reader's output (its own collectives watched), where the
    forward gave a tensor of the right shape (else that has failed already)."""
    if not isinstance(y, torch.Tensor) or y.shape != dy.shape:
        return False
    if not case.expect(
        y.requires_grad, "the output does not require grad: autograd cannot reach x"
    ):
        return False
    case.call(y.backward, dy)
    return True


def check_column_parallel(fn, grade: Grade) -> None:
    rank, t = grade.rank, grade.world_size
    k, n = 5, 3 * t  # odd in, out cut in t blocks of 3
    cols = slice(rank * 3, rank * 3 + 3)
    call = hinted(fn, WRONG_SHAPES)
    for shape in ((5,), (2, 3)):
        with grade.case(f"x of shape {(*shape, k)}, Linear({k}, {n})") as case:
            linear, x = dense(k, n, seed=7), integers((*shape, k), seed=8)
            dy = integers((*shape, n), seed=9)
            x_dense = leaf(x)
            y = linear(x_dense)  # the oracle: the dense layer, forward and backward
            y.backward(dy)
            x_mine = leaf(x)
            got = case.call(call, x_mine, copy.deepcopy(linear))
            if isinstance(got, torch.Tensor) and got.shape == y.shape:
                case.fail(
                    f"the output has all n = {n} features, not this rank's n/t = 3",
                    "hint: keep this rank's block of output features: rows "
                    f"[{cols.start}, {cols.stop}) of torch's (out, in) weight",
                )
                continue
            w, b = linear.weight.detach()[cols], linear.bias.detach()[cols]
            case.equal(
                got,
                y.detach()[..., cols],
                "the output",
                mistakes=(
                    (
                        F.linear(t * x, w, b),
                        "the output is t times this rank's block: f is the "
                        "identity forward; its all-reduce is in backward",
                    ),
                ),
            )
            forward = [c for c in case.calls if c.kind == "all_reduce"]
            case.expect(
                not forward,
                f"the forward made {len(forward)} all-reduce(s): f is the identity "
                "forward, the column-parallel forward needs no collective",
            )
            if not backward_through(case, got, dy[..., cols]):
                continue
            case.equal(
                x_mine.grad,
                x_dense.grad,
                "x.grad",
                mistakes=(
                    (
                        dy[..., cols] @ w,
                        "x.grad is only this rank's part: f's backward all-reduces "
                        "it (each block of the weight adds its share)",
                    ),
                ),
            )


def check_row_parallel(fn, grade: Grade) -> None:
    rank, t = grade.rank, grade.world_size
    k, n = 3 * t, 7  # in cut in t blocks of 3, odd out
    rows = slice(rank * 3, rank * 3 + 3)
    call = hinted(fn, WRONG_SHAPES)
    for shape in ((5,), (2, 3)):
        with grade.case(f"x of shape {(*shape, k)}, Linear({k}, {n})") as case:
            linear, x = dense(k, n, seed=17), integers((*shape, k), seed=18)
            dy = integers((*shape, n), seed=19)
            x_dense = leaf(x)
            y = linear(x_dense)
            y.backward(dy)
            x_mine = leaf(x[..., rows])
            got = case.call(call, x_mine, copy.deepcopy(linear))
            w, b = linear.weight.detach()[:, rows], linear.bias.detach()
            partial = x[..., rows] @ w.T  # (…, n): this rank's share of the sum
            case.equal(
                got,
                y.detach(),
                "the output",
                mistakes=(
                    (
                        partial + b,
                        "the output is this rank's partial product: g all-reduces "
                        "it (Σ over ranks) in forward",
                    ),
                    (
                        y.detach() + (t - 1) * b,
                        "the bias is added t times: add it once, after the sum",
                    ),
                ),
            )
            if not backward_through(case, got, dy):
                continue
            case.equal(
                x_mine.grad,
                x_dense.grad[..., rows],
                "x.grad",
                mistakes=(
                    (
                        t * x_dense.grad[..., rows],
                        "x.grad is t times too big: g's backward is the identity, "
                        "every rank already has the whole output's gradient",
                    ),
                ),
            )


# --- vocab_parallel_cross_entropy --------------------------------------------------


def check_vocab_cross_entropy(fn, grade: Grade) -> None:
    rank, t = grade.rank, grade.world_size
    n, shape = 5, (3, 5)  # V/t = 5 ids a rank, 15 tokens
    V, lo = n * t, rank * n
    call = hinted(
        fn,
        (
            "out of bounds",
            "a target outside [lo, lo + V/t) has no logit here: mask it",
        ),
    )
    for offset in (0.0, 1000.0):  # e^1000 overflows: only a shift by the max survives
        title = f"{shape} tokens, V = {V}" + (", logits near 1000" if offset else "")
        with grade.case(title) as case:
            g = torch.Generator().manual_seed(int(offset) + 3)
            logits = torch.randn((*shape, V), generator=g, dtype=torch.float64) * 3
            logits += offset
            targets = torch.randint(V, shape, generator=g)
            full = leaf(logits)
            expected = F.cross_entropy(full.view(-1, V), targets.view(-1))
            expected.backward()
            block = leaf(logits[..., lo : lo + n])
            got = case.call(call, block, targets)
            case.equal(
                got,
                expected.detach(),
                "the loss",
                rtol=1e-12,
                atol=1e-12,
                mistakes=cross_entropy_mistakes(logits, targets, t),
            )
            moved = [c for c in case.calls if c.numel > targets.numel()]
            case.expect(
                not moved,
                f"a call moved {moved[0].numel if moved else 0} values; each "
                f"all-reduce carries one number per token ({targets.numel()}): "
                "the logits are never gathered",
                *(f"call: {c}" for c in moved[:3]),
            )
            if not backward_through(case, got, torch.ones(())):
                continue
            case.equal(
                block.grad,
                full.grad[..., lo : lo + n],
                "logits.grad",
                rtol=1e-9,
                atol=1e-12,
            )


def cross_entropy_mistakes(logits: torch.Tensor, targets: torch.Tensor, t: int):
    """The loss a known mistake gives: each rank's own maximum, or the target's
    logit taken on every rank (its index clamped into the block)."""
    V = logits.shape[-1]
    n = V // t
    blocks = logits.unflatten(-1, (t, n))  # (…, t, V/t)
    local_max = blocks.amax(-1, keepdim=True)  # (…, t, 1)
    sum_exp = (blocks - local_max).exp().sum((-2, -1))
    owner = targets // n
    z_target = logits.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    shift = local_max.squeeze(-1).gather(-1, owner.unsqueeze(-1)).squeeze(-1)
    own_max = (sum_exp.log() - (z_target - shift)).mean()
    m = logits.amax(-1)  # the right shift
    lse = (logits - m.unsqueeze(-1)).exp().sum(-1).log()
    unmasked = []
    for clamp in (True, False):  # (targets - lo).clamp(…), or index 0 outside
        picked = torch.zeros_like(m)
        for r in range(t):
            local = targets - r * (V // t)
            inside = (local >= 0) & (local < V // t)
            index = (
                local.clamp(0, V // t - 1) if clamp else torch.where(inside, local, 0)
            )
            picked += blocks[..., r, :].gather(-1, index.unsqueeze(-1)).squeeze(-1) - m
        unmasked.append((lse - picked).mean())
    return (
        (
            lambda got: not bool(torch.isfinite(got).all()),
            "the loss is not finite: subtract the maximum logit before exp",
        ),
        (
            own_max,
            "each rank shifted by its own maximum: all-reduce it (ReduceOp.MAX) so "
            "every rank shifts by the same number",
        ),
        *(
            (
                loss,
                "the target's logit is counted on every rank: mask it where the "
                "target is outside this rank's block",
            )
            for loss in unmasked
        ),
    )


# --- the exercises -----------------------------------------------------------------

CHECKS = [
    Exercise(
        name="ddp_bucket_hook",
        function=average_bucket,
        check=check_average_bucket,
        world_sizes=(3, 2),
    ),
    Exercise(
        name="accumulate_loss_scale",
        function=accumulate,
        check=check_accumulate,
        world_sizes=(3, 2),
    ),
    Exercise(
        name="zero1_step", function=zero1_step, check=check_zero1, world_sizes=(3, 2)
    ),
    Exercise(
        name="column_parallel",
        function=column_parallel,
        check=check_column_parallel,
        world_sizes=(2, 3),
    ),
    Exercise(
        name="row_parallel",
        function=row_parallel,
        check=check_row_parallel,
        world_sizes=(2, 3),
    ),
    Exercise(
        name="vocab_parallel_cross_entropy",
        function=vocab_parallel_cross_entropy,
        check=check_vocab_cross_entropy,
        world_sizes=(2, 3),
    ),
]
