"""Presets: the tiny GPT is GPTConfig's defaults, the GPUs' peaks are dense BF16, and
the Llama 3 8B preset has the published config (where another calculator's does not)."""

from __future__ import annotations

from dataclasses import fields

from snippets.models.tiny_gpt import GPTConfig
from snippets.sizing import presets


def test_tiny_gpt_preset_is_gptconfig_defaults() -> None:
    defaults = {f.name: f.default for f in fields(GPTConfig)}
    tiny = presets.MODELS["tiny-gpt"]
    assert (tiny["vocab"], tiny["seq"], tiny["layers"]) == (
        defaults["vocab_size"],
        defaults["block_size"],
        defaults["n_layer"],
    )
    assert (tiny["heads"], tiny["hidden"], tiny["ffn"]) == (
        defaults["n_head"],
        defaults["n_embd"],
        4 * defaults["n_embd"],
    )
    assert (tiny["tied"], tiny["bias"]) == (
        defaults["tie_embeddings"],
        defaults["bias"],
    )


def test_peaks_are_dense_bf16_as_torchtitan_has_them() -> None:
    # torchtitan/tools/utils.py get_peak_flops: A100 312e12, H100 SXM 989e12, H200
    # 989e12; the H100 datasheet's 1,979 TFLOPS is "with sparsity": half is 989.5,
    # which torchtitan writes as 989.
    peaks = {k: g["peak_flops"] for k, g in presets.GPUS.items()}
    assert peaks["a100-40gb"] == peaks["a100-80gb"] == 312e12
    assert peaks["h100-sxm"] == peaks["h200"] == 989e12
    assert abs(peaks["h100-sxm"] - 1979e12 / 2) < 1e12
    assert peaks["b200"] == 4500e12 / 2  # 4.5 PFLOPS with sparsity
    for g in presets.GPUS.values():  # per direction: NVLink > PCIe > one NIC
        assert g["nvlink_bw"] > g["pcie_bw"] > g["ib_bw"] > 0


def test_llama3_8b_is_the_published_config() -> None:
    # config.json of meta-llama/Meta-Llama-3-8B: the Ultra-Scale Playbook widget's
    # preset has ffn 16384 and vocab 30522 (BERT's) instead.
    m = presets.MODELS["llama3-8b"]
    assert (m["ffn"], m["vocab"], m["kv_heads"], m["layers"]) == (14336, 128256, 8, 32)
    assert not m["tied"] and not m["bias"] and m["arch"] == "llama"
