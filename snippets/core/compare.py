"""How far a result is from its oracle: the largest absolute difference, max |a − b|.

Every check that trains or runs a model two ways (split and whole, ours and torch's)
ends in this one number, over tensors matched by name:

* two tensors: max |a − b| over their elements;
* two name → tensor mappings (state dicts): the largest over the names ``found``
  has, each of which the oracle must have (it may have more: a pipeline stage holds
  a part of the model);
* two modules: their named parameters, or with ``grads=True`` their gradients. A
  parameter of ``found`` without a gradient is left out (a pipeline stage has none
  for the layers it does not run); one whose oracle has none is an error.

``part(expected, found)`` picks the piece of the oracle's tensor that ``found`` holds
(a tensor-parallel rank's block), where the two are cut differently. A NaN anywhere is
the answer, never hidden by a larger finite difference: ``max`` alone would drop it,
since every comparison with NaN is false. Nothing compared (no elements) is 0.0.
"""

from __future__ import annotations

import math
from typing import Callable, Mapping, Union

import torch
import torch.nn as nn

Tensors = Union[torch.Tensor, Mapping[str, torch.Tensor], nn.Module]


def _named(tensors: Mapping | nn.Module, grads: bool) -> dict:
    if isinstance(tensors, nn.Module):
        return {n: p.grad if grads else p for n, p in tensors.named_parameters()}
    return dict(tensors)


def max_difference(
    found: Tensors,
    expected: Tensors,
    *,
    grads: bool = False,
    part: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None = None,
) -> float:
    """max |found − expected| over every element of every tensor matched by name."""
    if isinstance(found, torch.Tensor):
        pairs = {"": (found, expected)}
    else:
        a, b = _named(found, grads), _named(expected, grads)
        if a.keys() - b.keys():
            raise ValueError(f"the oracle has no {sorted(a.keys() - b.keys())}")
        pairs = {n: (a[n], b[n]) for n in a if a[n] is not None}
    worst = []
    for name, (x, y) in pairs.items():
        if y is None:
            raise ValueError(f"{name}: the oracle has no gradient to compare with")
        y = y if part is None else part(y, x)
        if x.numel():
            worst.append((x.detach() - y.detach()).abs().max().item())
    if any(math.isnan(d) for d in worst):
        return math.nan
    return max(worst, default=0.0)
