"""Activation bytes against Korthikanti et al. 2022 (arXiv:2205.05198) Table 2 and
§4.2.3, §4.3, at several shapes; exact, as their formulas are in whole bytes. And
against what one tiny GPT layer saves for backward, dense, TP and SP, measured with
saved_tensors_hooks on 2 ranks, the known differences stated."""

from __future__ import annotations

import pytest
from test_traffic import our_runs

from snippets.models.tiny_gpt import GPTConfig
from snippets.sizing import activations as act

SHAPES = [(2048, 1, 12288, 96, 8), (4096, 2, 4096, 32, 4), (1000, 3, 768, 12, 2)]


@pytest.mark.parametrize("s,b,h,a,t", SHAPES)
def test_korthikanti_table_2(s: int, b: int, h: int, a: int, t: int) -> None:
    def ours(t=1, sp=False, recompute="none", flash=False) -> float:
        return act.layer_bytes(
            "gpt", s, s, b, h, a, a, 4 * h, 2, t, sp, recompute, flash
        )

    sbh = s * b * h
    assert ours() == pytest.approx(sbh * (34 + 5 * a * s / h))
    assert ours(t) == pytest.approx(sbh * (10 + 24 / t + 5 * a * s / (h * t)))
    assert ours(t, sp=True) == pytest.approx(sbh * (34 / t + 5 * a * s / (h * t)))
    assert ours(t, recompute="selective") == pytest.approx(sbh * (10 + 24 / t))
    assert ours(t, True, "selective") == pytest.approx(sbh * 34 / t)
    assert ours(recompute="full") == 2 * sbh
    # FlashAttention keeps no scores: the same as selective recompute here
    assert ours(t, flash=True) == ours(t, recompute="selective")


def test_megatron_generalised_ffn_and_llama() -> None:
    # Megatron-LM's compute_activation_memory: sbh(18 + 4·ffn/h) a layer (SP and
    # selective), = 34 at ffn = 4h; here with t = 1, ffn = 3h.
    s, b, h = 128, 2, 64
    found = act.layer_bytes("gpt", s, s, b, h, 4, 4, 3 * h, 2, recompute="selective")
    assert found == s * b * h * (18 + 4 * 3)
    # llama, no dropout: 8h replicated, q, o 4h, k, v 4h_kv, SwiGLU 6·ffn (e = 2)
    R, S, A = act.layer_terms("llama", 64, 8, 2, 160, 2)
    assert (R, S, A) == (8 * 64, 4 * 64 + 4 * 16 + 6 * 160, 2 * 8)


def test_pipeline_first_stage() -> None:
    # 1F1B: min(m, p) micro-batches; interleaved × (1 + (p - 1)/(p·v))
    assert act.in_flight(m=8, p=4) == 4 and act.in_flight(m=2, p=4) == 2
    assert act.in_flight(m=8, p=4, v=2) == pytest.approx(4 * (1 + 3 / 8))
    s, b, L, h, a, V = 256, 1, 8, 64, 4, 1000
    kw = dict(recompute="selective", flash=True)
    one = act.layer_bytes("gpt", s, s, b, h, a, a, 4 * h, 2, **kw)
    p4 = act.activation_bytes("gpt", s, b, L, h, a, a, 4 * h, V, 2, p=4, m=8, **kw)
    assert p4 == pytest.approx(4 * (L / 4 * one + s * b * h))  # + embedding masks
    # p = 1: the head too, 4sbh(1 + V/h) (Korthikanti §4.3)
    p1 = act.activation_bytes("gpt", s, b, L, h, a, a, 4 * h, V, 2, **kw)
    assert p1 == pytest.approx(L * one + s * b * h + 4 * s * b * h * (1 + V / h))


def test_full_recompute_and_context_parallel() -> None:
    s, b, L, h, a, V = 512, 1, 4, 64, 4, 100
    base = dict(arch="gpt", s=s, b=b, L=L, h=h, a=a, kv=a, ffn=4 * h, V=V, e=2)
    full = act.activation_bytes(**base, recompute="full", flash=False)
    working = act.layer_bytes("gpt", s, s, b, h, a, a, 4 * h, 2, flash=False)
    head = act.head_bytes(s, b, h, V, 2)
    assert full == pytest.approx(L * 2 * s * b * h + s * b * h + head + working)
    # CP = 2: half the tokens on a GPU, their queries still meet all s keys
    cp2 = act.layer_bytes("gpt", s / 2, s, b, h, a, a, 4 * h, 2, flash=False)
    assert cp2 == pytest.approx((s / 2) * b * h * (34 + 5 * a * s / h))


def test_layer_bytes_against_the_saved_tensors_of_our_runs() -> None:
    # sequence_parallel_memory counts the storages autograd saves for one layer of
    # the tiny GPT (fp64: e = 8), on one (b, s, h) input; TP and SP at t = 2.
    cfg, b, e, t = GPTConfig(), 2, 8, 2
    s, h, a = cfg.block_size, cfg.n_embd, cfg.n_head
    for rank in our_runs():
        measured = {r["layout"]: r["measured"] * e for r in rank["activations"]}
        for layout, t_, sp in (("dense", 1, False), ("tp", t, False), ("sp", t, True)):
            predicted = act.layer_bytes(
                "gpt", s, s, b, h, a, a, 4 * h, e, t_, sp, "none", flash=True
            )
            cut = t_ if sp else 1  # what SP cuts of the replicated part
            # Known differences, bytes a token: the calculator's 1-byte dropout
            # masks (2h; the tiny GPT has dropout 0 and saves none); the two
            # LayerNorms' mean and 1/σ (4 values) it leaves out; the fused
            # attention's log-sum-exp, one value a head (a/t heads), in place of
            # the s² scores that flash=True already drops.
            differs = -2 * h / cut + 4 * e / cut + a * e / t_
            assert measured[layout] == predicted + s * b * differs, layout
