"""Parameter counts against Megatron's eq. 2, the tiny GPT's own count, a
Llama-shaped module built on the meta device; for mixtures of experts, moe.py's own
MoE layer, an MLA module of DeepSeek-V3's shape, and the published totals and active
counts of Mixtral 8x7B and DeepSeek-V3."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn

from snippets.models.moe import MoE
from snippets.models.tiny_gpt import GPT, GPTConfig
from snippets.sizing import params, presets


def count(name: str) -> int:
    return params.count(presets.MODELS[name])


@pytest.mark.parametrize(
    "name,billions",
    [("gpt3-175b", "174.6"), ("megatron-530b", "529.6"), ("megatron-1t", "1008.0")],
)
def test_megatron_equation_2(name: str, billions: str) -> None:
    # Narayanan et al. 2021 (arXiv:2104.04473) eq. 2, P = 12lh²(1 + 13/(12h) +
    # (V + s)/(12lh)); Table 1 prints it in billions to one decimal (rounded).
    m = presets.MODELS[name]
    h, L, V, s = m["hidden"], m["layers"], m["vocab"], m["seq"]
    eq2 = 12 * L * h**2 * (1 + 13 / (12 * h) + (V + s) / (12 * L * h))
    assert f"{eq2 / 1e9:.1f}" == billions
    # ours also counts the final LayerNorm (weight and bias), which eq. 2 leaves out
    assert count(name) - round(eq2) == 2 * h


def test_tiny_gpt_count_equals_the_model() -> None:
    model = GPT(GPTConfig())
    counted = sum(p.numel() for p in model.parameters())  # the tied weight once
    assert count("tiny-gpt") == counted == GPTConfig().num_params()
    odd = GPTConfig(37, 7, 3, 3, 15, bias=False, tie_embeddings=False)
    counted = sum(p.numel() for p in GPT(odd).parameters())
    mine = params.total_params("gpt", 37, 7, 3, 15, 3, 3, 60, False, False)
    assert mine == counted


class LlamaShape(nn.Module):
    """The Llama layout written out: parameters only (RoPE has none)."""

    def __init__(self, V, L, h, a, kv, ffn):
        super().__init__()
        d = h // a
        self.emb = nn.Embedding(V, h)
        self.layers = nn.ModuleList()
        for _ in range(L):
            lin = {
                n: nn.Linear(i, o, bias=False)
                for n, i, o in [
                    ("q", h, a * d), ("k", h, kv * d), ("v", h, kv * d),
                    ("o", a * d, h), ("gate", h, ffn), ("up", h, ffn),
                    ("down", ffn, h),
                ]
            }  # fmt: skip
            norms = {"n1": nn.RMSNorm(h), "n2": nn.RMSNorm(h)}
            self.layers.append(nn.ModuleDict(lin | norms))
        self.norm = nn.RMSNorm(h)
        self.head = nn.Linear(h, V, bias=False)


@pytest.mark.parametrize("name", ["llama3-8b", "llama2-7b"])
def test_llama_count_equals_a_module_of_that_shape(name: str) -> None:
    m = presets.MODELS[name]
    with torch.device("meta"):  # shapes only, no memory
        module = LlamaShape(
            m["vocab"], m["layers"], m["hidden"], m["heads"], m["kv_heads"], m["ffn"]
        )
    assert count(name) == sum(p.numel() for p in module.parameters())
    # Llama 3 8B is "8B" on its model card; Llama 2 7B is "7B" (6.74B)
    assert round(count(name) / 1e9) == {"llama3-8b": 8, "llama2-7b": 7}[name]


def test_tensor_parallel_split_by_hand() -> None:
    # gpt, h = 8, a = 2, ffn = 32, biases, t = 2. Split: q, k, v, o weights 4·64,
    # q, k, v biases 24, fc 8·32 + 32, proj 32·8 → (256 + 24 + 288 + 256)/2 = 412.
    # Replicated: o's bias 8, proj's bias 8, two LayerNorms 2·16 → 48.
    assert params.layer_params("gpt", 8, 2, 2, 32, True, t=2) == 412 + 48
    assert params.layer_params("gpt", 8, 2, 2, 32, True) == 12 * 64 + 13 * 8


def test_most_loaded_stage() -> None:
    # llama, V = 10, h = 4, a = kv = 1, ffn = 8, L = 4 on p = 2: a layer is
    # 4·16 + 3·32 + 2·4 = 168; first = 40 + 2·168, last = 2·168 + 4 + 40 (head)
    first = 40 + 2 * 168
    assert params.params_per_gpu("llama", 10, 0, 4, 4, 1, 1, 8, False, False, 1, 2) == (
        first + 4
    )
    # tied gpt on p = 2 keeps a second copy of the embedding on the last stage
    tied = params.params_per_gpu("gpt", 10, 3, 2, 4, 1, 1, 16, True, True, 1, 2)
    one = params.layer_params("gpt", 4, 1, 1, 16, True)
    assert tied == max(40 + 12 + one, one + 8 + 40)
    assert params.flop_params("gpt", 10, 3, 4, True, 100) == 100 - 12


# --- mixtures of experts -------------------------------------------------------------
def tiny_moe_model(E: int = 6, k: int = 2, h: int = 12, hidden: int = 20) -> dict:
    """moe.py's layer as the calculator sees it: GELU experts with biases, width
    ``hidden``, a bias-free router (the gpt arch's MLP is that expert)."""
    return dict(arch="gpt", hidden=h, heads=3, kv_heads=3, ffn=hidden, bias=True,
                experts=E, top_k=k)  # fmt: skip


def test_moe_layer_counts_equal_moe_py_module() -> None:
    # Oracle: snippets/models/moe.py's MoE, its own parameters counted;
    # for "active", the parameters one token's backward reaches (router and k experts)
    for E, k, h, hidden in ((6, 2, 12, 20), (5, 1, 7, 3), (4, 4, 8, 33)):
        parts = params.moe_layer_parts(tiny_moe_model(E, k, h, hidden))
        moe = MoE(h, hidden, E, top_k=k).double()
        assert parts["experts"] + parts["moe"] == sum(
            p.numel() for p in moe.parameters()
        )
        moe(torch.randn(1, h, dtype=torch.float64)).pow(2).sum().backward()
        touched = sum(
            p.numel() for p in moe.parameters() if p.grad is not None and p.grad.any()
        )
        assert parts["active"] - parts["attn"] == touched


def test_mixtral_against_its_paper() -> None:
    """Jiang et al. 2024 (arXiv:2401.04088) §2: 46.7B parameters, 12.9B active a
    token (the model card: "46.7B total, 12.9B active"). Both count the embedding and
    the head; ours equal them at the paper's one decimal. Without the input embedding
    (a lookup, as DeepSeek counts) the active count would be 12.7B."""
    c = params.moe_counts(presets.MODELS["mixtral-8x7b"])
    assert f"{c['total'] / 1e9:.1f}" == "46.7" and f"{c['active'] / 1e9:.1f}" == "12.9"
    assert c["total"] == c["main"]  # no MTP module
    assert f"{(c['active'] - 32000 * 4096) / 1e9:.1f}" == "12.7"


def test_deepseek_v3_against_its_report() -> None:
    """DeepSeek-V3 technical report (arXiv:2412.19437) abstract: 671B parameters,
    37B activated a token, the MTP module not in either. Ours: 671.03B, equal; active
    37.55B, 1.5% above 37B (allowed: 2%). The report rounds; the repository's
    README_WEIGHTS.md has said "36.6B (including 0.9B for the output Head)", which is
    ours without the input embedding (a lookup, 0.93B): 36.63B, and, in a later
    revision, "36.7B (including 0.9B for Embedding and 0.9B for the output Head)",
    which we cannot reproduce (with both, 37.55B). The MTP module's own parameters:
    README_WEIGHTS.md says 11.5B "unique"; ours are 11.61B, its MoE layer 11.51B of
    that plus eh_proj (2h·h = 0.10B) and three norms: the README's figure is the
    layer's alone. The router's score-correction bias (256 a layer) is left out."""
    m = presets.MODELS["deepseek-v3"]
    c = params.moe_counts(m)
    V, h = m["vocab"], m["hidden"]
    assert round(c["main"] / 1e9) == 671
    assert abs(c["active"] / 37e9 - 1) < 0.02
    assert f"{(c['active'] - V * h) / 1e9:.1f}" == "36.6"
    mtp = c["total"] - c["main"]
    layer = params.moe_layer_parts(m)
    assert mtp == layer["attn"] + layer["moe"] + layer["experts"] + 2 * h * h + 3 * h
    assert f"{(mtp - 2 * h * h - 3 * h) / 1e9:.1f}" == "11.5"


class MLAShape(nn.Module):
    """DeepSeek-V3's attention written out as its modeling code names it
    (DeepseekV3Attention): q_a_proj, q_a_layernorm, q_b_proj, kv_a_proj_with_mqa,
    kv_a_layernorm, kv_b_proj, o_proj; no biases (attention_bias false)."""

    def __init__(self, h, a, q_rank, kv_rank, nope, rope, v):
        super().__init__()
        self.q_a_proj = nn.Linear(h, q_rank, bias=False)
        self.q_a_layernorm = nn.RMSNorm(q_rank)
        self.q_b_proj = nn.Linear(q_rank, a * (nope + rope), bias=False)
        self.kv_a_proj_with_mqa = nn.Linear(h, kv_rank + rope, bias=False)
        self.kv_a_layernorm = nn.RMSNorm(kv_rank)
        self.kv_b_proj = nn.Linear(kv_rank, a * (nope + v), bias=False)
        self.o_proj = nn.Linear(a * v, h, bias=False)


def test_mla_count_equals_a_module_of_that_shape() -> None:
    m = presets.MODELS["deepseek-v3"]
    x = m["mla"]
    shape = (x["q_rank"], x["kv_rank"], x["nope"], x["rope"], x["v"])
    with torch.device("meta"):
        module = MLAShape(m["hidden"], m["heads"], *shape)
    split, replicated = params.mla_params(m["hidden"], m["heads"], *shape)
    assert split + replicated == sum(p.numel() for p in module.parameters())
    assert split + replicated == 187_107_328  # 0.187B a layer


def test_experts_per_gpu_under_ep() -> None:
    # Mixtral on ep = 8: one whole expert a layer a GPU, 32 · 3 · 4096 · 14336
    c = params.moe_counts(presets.MODELS["mixtral-8x7b"], ep=8)
    assert c["experts_per_gpu"] == 32 * 3 * 4096 * 14336
    # DeepSeek-V3's first 3 layers are dense: only 58 layers' (and MTP's) experts
    d = params.moe_counts(presets.MODELS["deepseek-v3"], ep=64)
    assert d["experts_per_gpu"] == (58 + 1) * 256 // 64 * 3 * 7168 * 2048
    # the layer rule: i ≥ dense_layers and i mod moe_every = 0
    assert [params.is_moe_layer(i, 4, 1, 2) for i in range(5)] == [
        False, False, True, False, True
    ]  # fmt: skip
    assert params.stage_layers(8, 2, 2, 1) == [2, 3, 6, 7]
