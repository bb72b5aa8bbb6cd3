"""Parameter counts against Megatron's eq. 2, the tiny GPT's own count, and a
Llama-shaped module built on the meta device."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn

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
