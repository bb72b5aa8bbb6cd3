"""Saved activations counted from autograd's own hooks: in flight from the forward
until the graph is freed, retained graphs included, no leak from saved outputs."""

from __future__ import annotations

import torch

from snippets.parallel.pipeline.pipeline_activations import LiveActivations


def test_keys_are_in_flight_until_their_graph_goes() -> None:
    live = LiveActivations()
    w = torch.randn(8, 8, requires_grad=True)
    losses = {}
    for key in range(3):
        with live.saving(key):
            losses[key] = (torch.randn(4, 8) @ w).tanh().sum()  # tanh saves its output
        assert live.sample() == key + 1
    losses[0].backward()  # freed by backward
    assert live.in_flight() == 2
    losses[1].backward(retain_graph=True)  # kept: freed when the loss goes
    assert live.in_flight() == 2
    del losses[1]
    assert live.in_flight() == 1 and live.peak == 3
    outside = (torch.randn(4, 8) @ w).sum()  # not inside saving(): not counted
    assert live.in_flight() == 1 and outside.requires_grad
