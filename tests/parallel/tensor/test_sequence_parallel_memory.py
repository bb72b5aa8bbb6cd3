"""The saved-activation count on a dense tiny GPT layer equals the layer formula at odd
sizes, and Korthikanti et al.'s equations agree with hand-worked values."""

from __future__ import annotations

from fractions import Fraction

import torch

from snippets.core.measure import saved_activation_bytes
from snippets.models.tiny_gpt import GPT, GPTConfig
from snippets.parallel.tensor.sequence_parallel_memory import (
    korthikanti_bytes,
    layer_activations,
)


def test_dense_layer_saves_what_the_formula_says() -> None:
    cfg = GPTConfig(vocab_size=11, block_size=7, n_layer=1, n_head=3, n_embd=15)
    block = GPT(cfg).double().blocks[0]
    b, s = 3, 7
    x = torch.randn(b, s, cfg.n_embd, dtype=torch.float64, requires_grad=True)
    measured = saved_activation_bytes(lambda: block(x), block)
    assert measured == 8 * layer_activations(b, s, cfg.n_embd, 3, 1, "dense")
    assert measured == 8 * (16 * s * b * 15 + 4 * s * b + 3 * b * s)  # by hand


def test_the_count_skips_parameters_and_counts_a_storage_once() -> None:
    lin = torch.nn.Linear(4, 4).double()
    x = torch.randn(2, 4, dtype=torch.float64, requires_grad=True)
    assert saved_activation_bytes(lambda: lin(x) + lin(x), lin) == 2 * 4 * 8


def test_at_t_1_every_layout_is_dense() -> None:
    for f in (layer_activations, korthikanti_bytes):
        dense = f(2, 16, 32, 4, 1, "dense")
        assert f(2, 16, 32, 4, 1, "tp") == dense == f(2, 16, 32, 4, 1, "sp")


def test_korthikanti_equations_by_hand() -> None:
    # GPT-3 175B's shape (a = 96, h = 12288, s = 2048) at t = 8: 5as/h = 80
    s, b, h, a, t = 2048, 1, 12288, 96, 8
    sbh = s * b * h
    assert korthikanti_bytes(b, s, h, a, t, "dense") == 114 * sbh
    assert korthikanti_bytes(b, s, h, a, t, "tp") == 23 * sbh
    assert korthikanti_bytes(b, s, h, a, t, "sp") == Fraction(114, 8) * sbh
