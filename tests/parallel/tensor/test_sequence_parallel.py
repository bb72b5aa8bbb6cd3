"""The sequence-parallel tiny GPT on 2 ranks: loss and every gradient equal one
process's (fp64), also after Adam steps; the activations saved per layer and the
elements sent equal the formulas (through the snippet's main); an odd sequence
length is one UsageError line."""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist

from snippets.core.compare import max_difference
from snippets.core.runtime import UsageError, launch
from snippets.models.tiny_gpt import GPT, GPTConfig, random_batch
from snippets.parallel.tensor import sequence_parallel as sp
from snippets.parallel.tensor.tp_gpt import own_part
from snippets.parallel.tensor.vocab_parallel import vocab_parallel_cross_entropy

CFG = GPTConfig(vocab_size=32, block_size=8, n_layer=2, n_head=2, n_embd=16)


def adam_steps(steps: int = 2) -> list[float]:
    """max |Δ| of the parameters vs one process after each fp64 Adam step."""
    dense = GPT(CFG).double()
    model = sp.sequence_parallel_gpt(dense)
    opts = [torch.optim.Adam(m.parameters(), lr=1e-2) for m in (dense, model)]
    worst = []
    for idx, targets in random_batch(CFG, 2, seed=3, steps=steps):
        dense(idx, targets)[1].backward()
        vocab_parallel_cross_entropy(sp.sp_logits(model, idx), targets).backward()
        sp.allreduce_sequence_grads(model)
        for opt in opts:
            opt.step()
            opt.zero_grad()
        worst.append(max_difference(model, dense, part=own_part))
    return worst


def checks() -> dict:
    out = {"main": sp.main(), "adam": adam_steps()}
    try:
        sp.sp_logits(sp.sequence_parallel_gpt(GPT(CFG)), torch.zeros(1, 7).long())
    except UsageError as error:
        out["usage"] = str(error)
    out["t"] = dist.get_world_size()
    return out


@pytest.fixture(scope="module")
def result() -> dict:
    return launch(checks, 2, "gloo", timeout_s=60)[0]


def test_gradients_and_loss_equal_one_process(result) -> None:
    assert max(result["main"]["max_abs_diff"]) < 1e-12
    assert max(result["adam"]) < 1e-12 and len(result["adam"]) == 2


def test_saved_activations_equal_the_formulas(result) -> None:
    rows = {r["layout"]: r for r in result["main"]["tables"]["activations"]}
    for r in rows.values():
        assert r["measured"] == r["formula"]
    assert rows["sp"]["measured"] * 2 == rows["dense"]["measured"]  # all of it ÷ t
    assert rows["sp"]["measured"] < rows["tp"]["measured"] < rows["dense"]["measured"]


def test_communication_equals_the_formulas(result) -> None:
    comm = {r["layout"]: r for r in result["main"]["tables"]["comm"]}
    bsh = 2 * 16 * 32  # the snippet's b, s, h
    assert comm["tp"]["sent"] == 8 * bsh / 2 and comm["sp"]["sent"] == 10 * bsh / 2
    assert comm["tp"]["forward"] == "2 all-reduce"
    assert comm["sp"]["forward"] == "2 all-gather, 2 reduce-scatter"
    assert comm["sp"]["backward"] == "4 all-gather, 2 reduce-scatter"


def test_sequence_not_divisible_is_one_usage_line(result) -> None:
    assert result["usage"].startswith("sequence length=7 is not divisible by")
    assert "\n" not in result["usage"]
