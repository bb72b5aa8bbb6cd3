"""The worked examples against figures that do not come from the calculator: the
ZeRO paper's 16Ψ, Megatron's 18 bytes, the 6·L·h·s a token that causal masking
saves, Llama 3 8B's published parameter count; and the self-check that guards every
"our runs" row fails when the calculator drifts from the measurement."""

from __future__ import annotations

import pytest

from snippets.models.tiny_gpt import GPTConfig
from snippets.parallel import sizing_examples
from snippets.sizing import activations, params

LLAMA3_8B_PARAMS = 8.03e9  # Llama 3 paper, Table 3


@pytest.fixture(scope="module")
def tables() -> dict:
    return sizing_examples.main()["tables"]


def test_zero_shrinks_the_model_states_only(tables: dict) -> None:
    stages = tables["zero_stages"]
    totals = [r["total GB"] for r in stages]
    assert totals == sorted(totals, reverse=True) and len(set(totals)) == 4
    assert len({r["activations GB"] for r in stages}) == 1


def test_published_conventions(tables: dict) -> None:
    full, halved = (r["GFLOP/token"] for r in tables["causal"])
    L, h, s = 32, 4096, 8192  # Llama 3 8B at the example's sequence length
    assert abs((full - halved) - 6 * L * h * s / 1e9) < 0.1
    assert [r["DP B/param"] for r in tables["bytes"][:2]] == [16, 18]


def test_our_runs_against_the_model_and_the_zero_paper(tables: dict) -> None:
    cfg, rows = GPTConfig(), tables["our_runs"]
    assert rows[0]["measured"] == cfg.num_params()  # the model counts itself
    assert rows[2]["measured"] == 16 * cfg.num_params()  # the ZeRO paper's 16Ψ


def test_fsdp_model_states_of_llama3_8b(tables: dict) -> None:
    gb = {r["part"]: r["GB"] for r in tables["torchtitan"]}
    states = gb["model states (2 + 4 + 12 B a parameter, ÷ 8)"]
    assert states == pytest.approx(LLAMA3_8B_PARAMS * 18 / 8 / 1e9, abs=0.1)


@pytest.mark.parametrize("part", ["count", "layer_bytes"])
def test_a_calculator_that_drifts_fails_the_self_check(monkeypatch, part) -> None:
    module = params if part == "count" else activations
    real = getattr(module, part)
    monkeypatch.setattr(module, part, lambda *a, **k: real(*a, **k) + 1)
    with pytest.raises(AssertionError):
        sizing_examples.our_runs()


def test_moe_rows(tables: dict) -> None:
    # DeepSeek-V3's routed experts, 58 MoE layers + the MTP module's, split 64 ways:
    # 4 experts of 3 · 7168 · 2048 a layer a GPU; ep = 1 sends no all-to-all
    rows = {r["ep"]: r for r in tables["moe_ep"]}
    assert rows[64]["experts a GPU B"] == round(59 * 4 * 3 * 7168 * 2048 / 1e9, 1)
    assert rows[1]["EP GB a step"] == 0 and rows[1]["all-to-all a MoE layer GB"] == 0
    # 8 routed of b·s = 4096 tokens, 7168 bf16 values a row, 4 exchanges, 63/64 out
    assert rows[64]["all-to-all a MoE layer GB"] == round(
        4 * 8 * 4096 * 7168 * 2 * 63 / 64 / 1e9, 3
    )
    published = {r["model"]: r for r in tables["moe_published"]}
    assert published["mixtral-8x7b"]["MTP module B"] == 0
