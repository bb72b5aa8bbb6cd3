"""Counting the activations a pipeline stage holds, from autograd itself.

Everything autograd saves for a backward pass goes through
``torch.autograd.graph.saved_tensors_hooks``. :class:`LiveActivations` packs each
saved tensor in a small holder tagged with the current key (chunk, micro-batch); the
holder lives exactly as long as autograd keeps the tensor, and says so when it goes.
A key is in flight while any of its holders lives, so ``in_flight()`` is the number
of micro-batch-chunks whose activations this rank holds now: measured, not
bookkept by the executor, so a graph kept alive by mistake shows up.
"""

from __future__ import annotations

from collections import Counter
from contextlib import contextmanager
from typing import Hashable, Iterator

import torch


class _Held:
    """One saved tensor; counts itself out when autograd lets go of it."""

    def __init__(self, tensor: torch.Tensor, key: Hashable, live: Counter) -> None:
        self.tensor, self.key, self.live = tensor, key, live
        live[key] += 1

    def __del__(self) -> None:
        self.live[self.key] -= 1


# --8<-- [start:live]
class LiveActivations:
    def __init__(self) -> None:
        self.live: Counter = Counter()  # key → saved tensors alive
        self.peak = 0

    @contextmanager
    def saving(self, key: Hashable) -> Iterator[None]:
        """Tensors autograd saves inside this block are counted under `key`."""

        def pack(t: torch.Tensor) -> _Held:  # detached: a saved output would
            return _Held(t.detach(), key, self.live)  # otherwise hold its own graph

        with torch.autograd.graph.saved_tensors_hooks(pack, lambda h: h.tensor):
            yield

    def in_flight(self) -> int:
        return sum(1 for n in self.live.values() if n > 0)

    def sample(self) -> int:
        """Note the current count in the peak; return it."""
        self.peak = max(self.peak, self.in_flight())
        return self.peak


# --8<-- [end:live]
