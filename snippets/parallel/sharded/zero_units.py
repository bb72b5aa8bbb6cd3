"""ZeRO-3's unit of communication: the pieces of one module, moved in one collective.

Stage 3 gathers a module's parameters just before they are needed and frees them
after. A unit is a module whose parameters travel together: each block of the tiny
GPT, and the root with everything outside the blocks (the embeddings, the tied head,
the final norm), as FSDP2 groups them when ``fully_shard`` wraps each block and then
the model. A unit is still sharded parameter by parameter (a ``Piece`` each, so the
optimizer and the memory count are unchanged), but its pieces share one flat buffer:

    rank r's input (S,) = [ chunk r of p₀ (s₀) | chunk r of p₁ (s₁) | … ],  S = Σ sᵢ
    all-gathered (N, S): column block i, read row by row, is pᵢ padded to N·sᵢ

so one ``all_gather_single`` rebuilds every parameter of the unit, and one
``reduce_scatter_single`` of an (N, S) gradient buffer leaves each rank its chunks of
every gradient's sum. The values handed over are the same as parameter by parameter;
the calls go from one per parameter to one per unit.

Prefetch: a unit's gather can be started (``async_op=True``) while the unit before it
computes, and waited on only when the unit itself is entered.

A unit's gradients are reduced once the last of them is accumulated, and that
reduce-scatter, too, is only started: it runs while the next unit computes its
backward, and is waited on just before that unit starts its own. One is in flight at a
time, as FSDP2 keeps at most one reduce-scatter buffer outstanding, so no more than two
units' full gradients exist at once. When a backward ends, a callback queued on
autograd's engine waits on the last one; it also reduces a unit left without some
gradient (a parameter forward did not use): that piece travels as zeros and is given
none, as in one process.
"""

from __future__ import annotations

import functools

import torch
import torch.nn as nn
from torch.autograd import Variable
from torch.utils._pytree import tree_flatten

from snippets.parallel.sharded.zero_shards import CommCounter, Piece


# --8<-- [start:unit]
class Unit:
    """Pieces gathered, freed and reduced together, through one flat buffer."""

    def __init__(
        self, pieces: list[Piece], comm: CommCounter, in_flight: list | None = None
    ):
        self.pieces, self.comm, self.N = pieces, comm, pieces[0].N
        self.sizes = [piece.s for piece in pieces]  # sᵢ, this rank's share of each
        self.S = sum(self.sizes)
        self.pending = None  # (work, gathered, mine): a gather started, not waited on
        self.ready: set[int] = set()  # ids of pieces this backward gave a gradient
        self.reducing = None  # (work, summed, full, have): a reduce-scatter started
        # shared by a model's units: the one whose reduce-scatter may still be running
        self.in_flight = [] if in_flight is None else in_flight

    @property
    def is_full(self) -> bool:
        return all(piece.is_full for piece in self.pieces)

    def start_gather(self) -> None:
        """Launch the all-gather of every piece's chunk; returns at once."""
        if self.pending is None and not self.is_full:
            mine = torch.cat([pc.padded(pc.chunk.data, pc.s, 0) for pc in self.pieces])
            gathered = mine.new_empty(self.N, self.S)  # (N, S): row r is rank r's
            work = self.comm.all_gather(gathered.view(-1), mine, async_op=True)
            self.pending = (work, gathered, mine)  # mine lives until the work is done

    def gather(self) -> None:
        """The full parameters, from the gather started earlier (or one started now)."""
        self.start_gather()
        if self.pending is None:  # already full
            return
        work, gathered, _ = self.pending
        work.wait()
        for piece, cols in zip(self.pieces, gathered.split(self.sizes, dim=1)):
            piece.fill(cols.reshape(-1))  # (N, sᵢ) row by row = pᵢ, padded
        self.pending = None

    def free(self) -> None:
        if self.pending is not None:  # a prefetch nobody waited on: it is stale now
            self.pending[0].wait()
            self.pending = None
        for piece in self.pieces:
            piece.free()

    def grad_ready(self, piece: Piece, param: torch.Tensor) -> None:
        """Post-accumulate-grad hook of each piece: reduce once all are in."""
        if not self.ready:  # the first this backward: make sure the unit is reduced
            Variable._execution_engine.queue_callback(self.finish_backward)
        self.ready.add(id(piece))
        if len(self.ready) == len(self.pieces):
            self.reduce_grads()

    def reduce_grads(self) -> None:
        """Start one reduce-scatter of every gradient in the unit, once the previous
        unit's has finished (one in flight); drop the full gradients and the full
        parameters."""
        if not self.ready:  # reduced already, when its last gradient came in
            return
        for unit in self.in_flight:  # the unit reduced before this one
            unit.wait_reduce()
        have = [piece.param.grad is not None for piece in self.pieces]
        full = self.pieces[0].chunk.data.new_zeros(self.N, self.S)  # (N, S)
        for piece, cols, has in zip(self.pieces, full.split(self.sizes, 1), have):
            if has:  # ∇p padded to N·sᵢ, laid out (N, sᵢ): row r goes to rank r
                grad = piece.padded(piece.param.grad.reshape(-1), self.N * piece.s, 0)
                cols.copy_(grad.view(self.N, piece.s))
                piece.param.grad = None
        summed = full.new_empty(self.S)  # (S,)
        work = self.comm.reduce_scatter(summed, full.view(-1), async_op=True)
        self.reducing = (work, summed, full, have)  # full lives until the work is done
        self.in_flight[:] = [self]
        self.ready.clear()
        self.free()

    def wait_reduce(self) -> None:
        """This rank's chunks of the sums, ÷ N, become (or add to) the chunks' .grad."""
        if self.reducing is None:
            return
        work, summed, _, have = self.reducing
        work.wait()
        for piece, mine, has in zip(self.pieces, summed.split(self.sizes), have):
            if has:
                piece.take_grad(mine)
        self.reducing = None

    def finish_backward(self) -> None:
        """Queued on autograd's engine: when backward ends, the unit is reduced
        (even one short of a gradient) and its reduce-scatter waited on."""
        self.reduce_grads()
        self.wait_reduce()


# --8<-- [end:unit]


# --8<-- [start:hooks]
def _gather_next(unit: Unit, after: Unit | None, *_) -> None:
    """Before a unit's forward, and before its backward: wait for its parameters,
    then start the gather of the unit that comes after it."""
    unit.gather()
    if after is not None:
        after.start_gather()  # its all-gather runs while this unit computes


def _after_forward(unit: Unit, after: Unit | None, module, args, output) -> None:
    """Free the unit; if autograd will come back, gather it again when the gradient
    reaches this unit's output, that is just before the unit's own backward."""
    unit.free()
    if torch.is_grad_enabled():
        hook = functools.partial(_gather_next, unit, after)
        for t in tree_flatten(output)[0]:
            if isinstance(t, torch.Tensor) and t.requires_grad:
                t.register_hook(hook)


def hook_units(
    module: nn.Module, pieces: dict[int, Piece], comm: CommCounter
) -> list[Unit]:
    """Units for ``module``: the root (what is outside ``module.blocks``), then each
    block; one with nothing to train is left out. Forward runs the root, then blocks
    0…L-1; backward the root, then blocks L-1…0. The unit after a unit in its
    direction's order is the one to prefetch."""
    blocks = list(getattr(module, "blocks", []))
    in_blocks = {id(p) for block in blocks for p in block.parameters()}
    rest = [pc for i, pc in pieces.items() if i not in in_blocks]
    groups = [(module, rest)] + [
        (b, [pieces[id(p)] for p in b.parameters() if id(p) in pieces]) for b in blocks
    ]
    in_flight: list[Unit] = []  # the one unit whose reduce-scatter may be running
    owned = [(owner, Unit(group, comm, in_flight)) for owner, group in groups if group]
    forward = [unit for _, unit in owned]  # root, blocks 0…L-1
    backward = forward[:1] + forward[:0:-1] if rest else forward[::-1]  # root, L-1…0
    after = {
        "fwd": dict(zip(forward, forward[1:])),
        "bwd": dict(zip(backward, backward[1:])),
    }
    for owner, unit in owned:
        before = functools.partial(_gather_next, unit, after["fwd"].get(unit))
        owner.register_forward_pre_hook(before)
        post = functools.partial(_after_forward, unit, after["bwd"].get(unit))
        owner.register_forward_hook(post)
        for piece in unit.pieces:
            hook = functools.partial(unit.grad_ready, piece)
            piece.param.register_post_accumulate_grad_hook(hook)
        unit.free()
    return forward


# --8<-- [end:hooks]
