"""ZeRO-3 units: one all-gather rebuilds every parameter of a unit, one reduce-scatter
leaves each rank its chunks of every gradient's mean (the oracle: dist.all_reduce,
then ÷ N and slice); a unit some of whose parameters get no gradient is still reduced
when backward ends. On the tiny GPT, stage 3 makes 2 all-gathers and 1 reduce-scatter
per unit and step (L blocks and the root: L + 1 units, against dozens of parameters),
still hands over 3Ψ of the padded sizes, still trains as one process does, and has
the next unit's gather in flight while a unit computes, in both directions, and in
backward the reduce-scatter of the unit computed before it, never two at once."""

from __future__ import annotations

import functools

import torch
import torch.distributed as dist
import torch.nn as nn

from snippets.core.compare import max_difference
from snippets.core.runtime import launch
from snippets.models.tiny_gpt import GPT, GPTConfig, random_batch
from snippets.parallel.sharded import zero
from snippets.parallel.sharded.zero_shards import CommCounter, Piece
from snippets.parallel.sharded.zero_units import Unit

CFG = GPTConfig(vocab_size=64, block_size=16, n_layer=3, n_head=2, n_embd=32)
F64 = torch.float64


def one_unit() -> dict:
    """Two parameters of 5 and 2 values on 3 ranks: chunks of 2 and 1 (the last rank's
    are 1 and 0 values long), S = 3. Gather, then two backwards: both used, then only
    the first (reduced at the end of backward, the second given no gradient)."""
    rank, N = dist.get_rank(), dist.get_world_size()
    want = [torch.arange(5.0, dtype=F64), torch.arange(2.0, dtype=F64) + 10]
    params = [nn.Parameter(w.clone()) for w in want]
    comm = CommCounter()
    pieces = [Piece(p, comm, own_storage=True) for p in params]
    unit = Unit(pieces, comm)
    for piece in pieces:
        hook = functools.partial(unit.grad_ready, piece)
        piece.param.register_post_accumulate_grad_hook(hook)
    unit.free()
    out = {"freed": [p.untyped_storage().nbytes() for p in params]}
    unit.gather()
    out["gathered"] = all(torch.equal(p.detach(), w) for p, w in zip(params, want))
    out["after_gather"] = dict(comm.calls), dict(comm.elements)
    scale = torch.tensor([rank + 1.0, 10 * rank - 3.0], dtype=F64)  # varies by rank
    grads = [scale[0] * (1 + torch.arange(5.0, dtype=F64)), scale[1].expand(2)]
    oracle = [g.clone() for g in grads]
    for g in oracle:
        dist.all_reduce(g)  # Σ over ranks, the built-in collective
    (sum((g * p).sum() for g, p in zip(grads, params))).backward()
    out["chunk_grads"] = [pc.chunk.grad.clone() for pc in pieces]
    out["oracle"] = [(g / N)[pc.a : pc.b] for g, pc in zip(oracle, pieces)]
    out["dropped"] = [p.grad is None for p in params]
    out["freed_after"] = [p.untyped_storage().nbytes() for p in params]
    for piece in pieces:
        piece.chunk.grad = None
    unit.gather()
    (grads[0] * params[0]).sum().backward()  # the second parameter: no gradient
    out["partial"] = [
        None if pc.chunk.grad is None else pc.chunk.grad.clone() for pc in pieces
    ]
    out["calls"] = dict(comm.calls)
    return out


def states(units: list) -> list[str]:
    return ["pending" if u.pending else "full" if u.is_full else "free" for u in units]


def reducing(units: list) -> list[bool]:
    return [u.reducing is not None for u in units]


def watch(module: nn.Module, units: list, seen: list) -> None:
    """Record every unit's state, and which have a reduce-scatter in flight, as each
    block starts its forward and its backward."""
    for i, block in enumerate(module.blocks):

        def forward_started(block, args, i=i) -> None:
            seen.append(("forward", i, states(units), reducing(units)))

        def forward_ended(block, args, output, i=i) -> None:
            def record(grad) -> None:
                seen.append(("backward", i, states(units), reducing(units)))

            output.register_hook(record)  # after the gather hook zero put there

        block.register_forward_pre_hook(forward_started)
        block.register_forward_hook(forward_ended)


def gpt_runs() -> dict:
    """Stage 3 on the tiny GPT: collective calls per step and the units' states, then
    the frozen-and-unused model with 2 micro-steps, against one process."""
    N = dist.get_world_size()
    data = random_batch(CFG, 2 * N, steps=2)
    sgd, kw = torch.optim.SGD, {"lr": 0.1}
    single = zero.train_single(CFG, sgd, kw, data, F64)
    module, opt = zero.shard(GPT(CFG).to(F64), sgd, 3, **kw)
    seen: list = []
    watch(module, opt.units, seen)
    per_step = []
    rank, b = dist.get_rank(), 2
    for idx, targets in data:
        opt.zero_grad()
        opt.comm.reset()
        rows = slice(rank * b, (rank + 1) * b)
        module(idx[rows], targets[rows])[1].backward()
        opt.step()
        per_step.append((dict(opt.comm.calls), dict(opt.comm.elements)))
    state = zero.full_state_dict(module)
    other, unused, _ = zero.train_sharded(
        CFG, 3, sgd, kw, data, F64, make=with_unused, micro_steps=2
    )
    return {
        "per_step": per_step,
        "reducing_after": reducing(opt.units),  # after the last step's backward
        "units": len(opt.units),
        "pieces": len(opt.pieces),
        "padded": sum(pc.N * pc.s for pc in opt.pieces),
        "vs_single": max_difference(state, single),
        "seen": seen[: 2 * CFG.n_layer],  # the first step's
        "unused_calls": dict(unused.comm.calls),
        "unused_grad": next(
            pc.chunk.grad for pc in unused.pieces if pc.param is other.unused
        ),
    }


def with_unused(cfg: GPTConfig) -> nn.Module:
    model = GPT(cfg)
    model.unused = nn.Parameter(torch.ones(2))  # in the root unit, never used
    return model


def checks() -> tuple[dict, dict]:
    return one_unit(), gpt_runs()


def test_units_on_3_ranks() -> None:
    results = launch(checks, 3, backend="gloo", timeout_s=60)
    for rank, (unit, gpt) in enumerate(results):
        where = f"rank {rank}"
        assert unit["freed"] == [0, 0] and unit["gathered"], where
        calls, elements = unit["after_gather"]  # N·S = 9 values, in one call
        assert calls == {"all_gather": 1, "reduce_scatter": 0}, where
        assert elements == {"all_gather": 9, "reduce_scatter": 0}, where
        for got, want in zip(unit["chunk_grads"], unit["oracle"]):
            assert got.shape == want.shape and torch.allclose(got, want), where
        assert unit["dropped"] == [True, True], where  # the full gradients
        assert unit["freed_after"] == [0, 0], where  # reduced, then freed
        first, second = unit["partial"]
        assert torch.allclose(first, unit["oracle"][0]) and second is None, where
        assert unit["calls"] == {"all_gather": 2, "reduce_scatter": 2}, where
        # the tiny GPT: L + 1 units, far fewer than its parameters
        L = CFG.n_layer
        assert gpt["units"] == L + 1 < gpt["pieces"], where
        for calls, elements in gpt["per_step"]:
            assert calls == {"all_gather": 2 * (L + 1), "reduce_scatter": L + 1}, where
            padded = gpt["padded"]
            assert elements == {"all_gather": 2 * padded, "reduce_scatter": padded}
        assert gpt["vs_single"] < 1e-12, where
        # two backwards a step, the root unit reduced at the end of each
        calls = gpt["unused_calls"]
        assert calls == {"all_gather": 4 * (L + 1), "reduce_scatter": 2 * (L + 1)}
        assert gpt["unused_grad"] is None, where
        # forward: block i computes with block i + 1's gather in flight; backward:
        # block i with block i - 1's, and with block i + 1's reduce-scatter; never
        # more than two blocks held or coming, nor two reduce-scatters running
        for phase, i, state, rs in gpt["seen"]:
            blocks, where = state[1:], (phase, i, state, rs)
            assert state[0] == "full" and blocks[i] == "full", where
            ahead = i + 1 if phase == "forward" else i - 1
            if 0 <= ahead < L:
                assert blocks[ahead] == "pending", where
            assert sum(s != "free" for s in blocks) <= 2, where
            behind = [phase == "backward" and j == i + 1 for j in range(L)]
            assert rs == [False, *behind], where
        assert gpt["reducing_after"] == [False] * (L + 1), where  # all waited on
        assert [(p, i) for p, i, _, _ in gpt["seen"]] == [
            *(("forward", i) for i in range(L)),
            *(("backward", i) for i in reversed(range(L))),
        ]
