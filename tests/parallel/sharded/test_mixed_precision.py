"""Mixed precision in one process: a bf16 weight loses updates a master keeps (worked by
hand), a step is exactly fp32 Adam on the cast-up gradients followed by rounding, and a
bf16 GPT with fp32 Adam masters holds 2 + 2 + 12 = 16 bytes a parameter. The snippet
itself (ZeRO stages 1-3, vs an fp32 run) runs in tests/parallel/sharded/test_zero.py's
2-rank launch."""

from __future__ import annotations

import torch
import torch.nn as nn
from conftest import refused

from snippets.core.cli import snippet_options
from snippets.models.tiny_gpt import GPT, GPTConfig, random_batch
from snippets.parallel.sharded import mixed_precision as mp
from snippets.parallel.sharded import zero

CFG = GPTConfig(vocab_size=64, block_size=16, n_layer=2, n_head=2, n_embd=32)


def test_small_updates_round_away_in_bf16_and_add_up_in_a_master() -> None:
    alone, master = mp.small_updates(steps=10, lr=1e-3)
    # below 1.0 bf16 values are k/256; 1 - 0.001 is nearer 256/256 than 255/256
    assert alone == 1.0
    assert master == 253 / 256  # 0.99 · 256 = 253.44: the master's 0.99, rounded


def test_a_step_is_fp32_adam_on_cast_up_grads_then_rounding() -> None:
    torch.manual_seed(0)
    model = nn.Linear(5, 3).to(mp.LOW)
    opt = mp.with_master_weights(torch.optim.Adam)(model.parameters(), lr=0.1)
    masters = [p.detach().float().clone().requires_grad_() for p in model.parameters()]
    by_hand = torch.optim.Adam(masters, lr=0.1)
    for _ in range(3):
        opt.zero_grad()
        model(torch.randn(4, 5, dtype=mp.LOW)).square().sum().backward()
        for m, p in zip(masters, model.parameters()):
            assert p.grad.dtype == mp.LOW
            m.grad = p.grad.float()
        opt.step()
        by_hand.step()
        for m, mine, p in zip(masters, opt.masters, model.parameters()):
            assert torch.equal(mine, m)  # the fp32 step, bit for bit
            assert torch.equal(p, m.to(mp.LOW))  # the weight is its master, rounded
            assert mine.grad is None and p.grad is not None  # fp32 grads are transient
    assert opt.param_groups[0]["lr"] == 0.1
    opt.zero_grad()
    assert all(p.grad is None for p in model.parameters())


def test_frozen_parameters_get_no_master() -> None:
    model = nn.Linear(4, 2).to(mp.LOW)
    model.bias.requires_grad_(False)
    opt = mp.MasterWeights(model.parameters(), torch.optim.SGD, lr=1.0)
    assert [m.shape for m in opt.masters] == [model.weight.shape]
    model(torch.ones(1, 4, dtype=mp.LOW)).sum().backward()
    before = model.bias.clone()
    opt.step()
    assert torch.equal(model.bias, before)


def test_one_process_holds_16_bytes_a_parameter() -> None:
    psi = CFG.num_params()
    model = GPT(CFG).to(mp.LOW)
    opt = mp.MasterWeights(model.parameters(), torch.optim.Adam, lr=1e-3)
    idx, _ = random_batch(CFG, 2)
    model(idx, idx)[1].backward()
    opt.step()
    m = zero.memory_report(model, opt)
    tensors = len(list(model.parameters()))
    assert m["parameters"] == 2 * psi and m["gradients"] == 2 * psi
    assert m["optimizer_scalars"] == 4 * tensors  # Adam's 0-d step counters
    assert m["optimizer"] - m["optimizer_scalars"] == 12 * psi  # master + 2 moments
    assert mp.held_bytes(model, opt) == 16 * psi


def test_steps_0_is_one_line_and_exit_2(capfd) -> None:
    def parse(argv: list[str]) -> dict:
        return snippet_options(mp, argv, "mixed_precision")

    refused(["--steps", "0"], capfd, entry=parse)
