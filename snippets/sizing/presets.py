"""Hardware and model presets for the sizing calculator: plain numbers with sources.

GPUs: dense BF16 tensor-core FLOP/s (never the "with sparsity" figure, which is twice
as large), HBM bytes and bytes/s, and per-direction link bandwidths in bytes/s: the
GPU's NVLink, its PCIe slot and the InfiniBand NIC each GPU of the vendor's 8-GPU box
has. Latencies (α) are assumptions, not datasheet figures: a few µs per message.

Models: dimensions from the published configs, linked beside each one. ``arch`` is
``gpt`` (learned positions, GELU MLP, biases, LayerNorm) or ``llama`` (RoPE, SwiGLU,
grouped-query attention, RMSNorm, no biases). ``seq`` is the training context length.
A model with experts also has the keys of :func:`_moe`, and DeepSeek-V3 an ``mla``.

"this-machine" (:func:`this_machine`) is measured, not a datasheet: the roofline
note's peak and bandwidth and the latency note's fitted α and β, read from
``results/``, with the ranks sharing one machine's cores.
"""

from __future__ import annotations

GB = 1e9  # datasheets count in powers of ten
NVLINK3, NVLINK4, NVLINK5 = 300 * GB, 450 * GB, 900 * GB  # per direction
PCIE4, PCIE5 = 31.5 * GB, 63.0 * GB  # ×16, per direction, after 128b/130b coding
IB_HDR, IB_NDR = 25 * GB, 50 * GB  # 200 and 400 Gb/s, one NIC per GPU
ALPHA_INTRA, ALPHA_INTER = 3e-6, 8e-6  # seconds per message: assumed


def _gpu(peak_flops, hbm_gb, hbm_bw_gbps, nvlink_bw, pcie_bw, ib_bw) -> dict:
    return dict(
        peak_flops=peak_flops,
        hbm_bytes=hbm_gb * GB,
        hbm_bw=hbm_bw_gbps * GB,
        nvlink_bw=nvlink_bw,
        pcie_bw=pcie_bw,
        ib_bw=ib_bw,
        alpha_intra=ALPHA_INTRA,
        alpha_inter=ALPHA_INTER,
    )


# --8<-- [start:gpus]
GPUS: dict[str, dict] = {
    # A100: nvidia.com/en-us/data-center/a100 (datasheet): BF16 312 TFLOPS dense
    # (624 with sparsity); 40 GB HBM2 1,555 GB/s, 80 GB HBM2e 2,039 GB/s (SXM);
    # NVLink 3 600 GB/s both ways. DGX A100: 8 × HDR 200 Gb/s NICs.
    "a100-40gb": _gpu(312e12, 40, 1555, NVLINK3, PCIE4, IB_HDR),
    "a100-80gb": _gpu(312e12, 80, 2039, NVLINK3, PCIE4, IB_HDR),
    # H100 SXM: nvidia.com/en-us/data-center/h100 (datasheet): BF16 1,979 TFLOPS
    # "with sparsity", so 989 dense (torchtitan's get_peak_flops uses 989e12);
    # 80 GB HBM3 3.35 TB/s; NVLink 4 900 GB/s both ways; DGX H100: 8 × NDR 400 Gb/s.
    "h100-sxm": _gpu(989e12, 80, 3350, NVLINK4, PCIE5, IB_NDR),
    # H200: nvidia.com/en-us/data-center/h200: the H100's compute (989 dense, as in
    # torchtitan), 141 GB HBM3e 4.8 TB/s, NVLink 900 GB/s both ways.
    "h200": _gpu(989e12, 141, 4800, NVLINK4, PCIE5, IB_NDR),
    # B200 (DGX B200 datasheet, nvidia.com/en-us/data-center/dgx-b200): BF16 2.25
    # PFLOPS dense per GPU (4.5 with sparsity), 180 GB HBM3e, 8 TB/s, NVLink 5
    # 1.8 TB/s both ways, 8 × ConnectX-7 400 Gb/s. Secondary sources; unverified.
    "b200": _gpu(2250e12, 180, 8000, NVLINK5, PCIE5, IB_NDR),
}
# --8<-- [end:gpus]
THIS_MACHINE = "this-machine"


# --8<-- [start:this_machine]
def this_machine(
    roofline: dict, cost: dict, ranks: int, cores: int, memory_bytes: float
) -> dict:
    """One rank's hardware when ``ranks`` ranks share this machine's ``cores``: the
    roofline record's ``peak_matmul_flops`` and ``bandwidth_bytes_per_s`` (measured
    with every core), times the share a rank gets, and the cost-model record's α and
    1/β for every link (gloo on one machine: no NVLink, PCIe or NIC in the way).

    A rank runs max(1, cores // ranks) threads (the runtime's rule) and its threads
    get at most cores/ranks cores when the ranks outnumber them: its share of the
    machine is min(threads, cores/ranks) / cores, 1/ranks whenever ranks divide
    the cores or outnumber them."""
    threads = max(1, cores // ranks)
    share = min(threads, cores / ranks) / cores
    link = 1 / cost["beta_s_per_byte"]
    found = _gpu(
        roofline["peak_matmul_flops"] * share,
        memory_bytes / ranks / GB,
        roofline["bandwidth_bytes_per_s"] * share / GB,
        link, link, link,
    )  # fmt: skip
    alpha = cost["alpha_s"]
    return found | {"alpha_intra": alpha, "alpha_inter": alpha, "share": share}


# --8<-- [end:this_machine]


def _model(arch, V, s, L, h, a, kv, ffn, tied, bias) -> dict:
    return {
        "arch": arch,
        "vocab": V,
        "seq": s,
        "layers": L,
        "hidden": h,
        "heads": a,
        "kv_heads": kv,
        "ffn": ffn,
        "tied": tied,
        "bias": bias,
    }


def _gpt(V, s, L, h, a, tied=True, bias=True) -> dict:
    """A GPT-2-shaped model: MLP 4h, every head full (kv_heads = heads)."""
    ffn = 4 * h
    return _model("gpt", V, s, L, h, a, a, ffn, tied, bias)


def _llama(V, s, L, h, a, kv, ffn) -> dict:
    """A Llama-shaped model: SwiGLU of width ffn, kv heads, untied head, no biases."""
    return _model("llama", V, s, L, h, a, kv, ffn, False, False)


def _moe(experts, top_k, shared_experts=0, expert_ffn=None, dense_layers=0, mtp=0):
    """The MoE keys (``snippets.sizing.params.moe_shape``); expert_ffn defaults to
    the model's ffn, and every layer from ``dense_layers`` on is MoE."""
    found = {"experts": experts, "top_k": top_k, "shared_experts": shared_experts}
    found |= {"dense_layers": dense_layers, "moe_every": 1, "mtp": mtp}
    return found | ({"expert_ffn": expert_ffn} if expert_ffn else {})


# --8<-- [start:models]
MODELS: dict[str, dict] = {
    # GPT-2 small: huggingface.co/openai-community/gpt2/blob/main/config.json
    "gpt2-124m": _gpt(50257, 1024, 12, 768, 12),
    # GPT-3 175B: Brown et al. 2020 (arXiv:2005.14165) Table 2.1; the vocabulary
    # padded to 51,200 as in Narayanan et al. 2021 (arXiv:2104.04473) Table 1.
    "gpt3-175b": _gpt(51200, 2048, 96, 12288, 96),
    # Narayanan et al. 2021 Table 1, the 530B and 1T rows (same vocabulary and s).
    "megatron-530b": _gpt(51200, 2048, 105, 20480, 128),
    "megatron-1t": _gpt(51200, 2048, 128, 25600, 160),
    # huggingface.co/meta-llama/Llama-2-7b-hf/blob/main/config.json
    "llama2-7b": _llama(32000, 4096, 32, 4096, 32, 32, 11008),
    # huggingface.co/meta-llama/Meta-Llama-3-8B/blob/main/config.json
    "llama3-8b": _llama(128256, 8192, 32, 4096, 32, 8, 14336),
    # huggingface.co/meta-llama/Meta-Llama-3-70B/blob/main/config.json
    "llama3-70b": _llama(128256, 8192, 80, 8192, 64, 8, 28672),
    # huggingface.co/meta-llama/Llama-3.1-405B/blob/main/config.json
    "llama3-405b": _llama(128256, 8192, 126, 16384, 128, 8, 53248),
    # snippets/models/tiny_gpt.py: GPTConfig() as every parallel snippet builds it
    # (sizing sits below models, so tests/sizing/test_presets.py holds them equal)
    "tiny-gpt": _gpt(64, 16, 2, 32, 2),
    # huggingface.co/mistralai/Mixtral-8x7B-v0.1/blob/main/config.json: every layer
    # MoE, 8 experts of width 14336, top-2 (Jiang et al. 2024, arXiv:2401.04088)
    "mixtral-8x7b": _llama(32000, 32768, 32, 4096, 32, 8, 14336)
    | _moe(experts=8, top_k=2),
    # huggingface.co/deepseek-ai/DeepSeek-V3/blob/main/config.json: 256 routed
    # experts + 1 shared of width 2048 (moe_intermediate_size), top-8, the first 3
    # layers dense (first_k_dense_replace, intermediate_size 18432), one MTP module
    # (num_nextn_predict_layers); MLA: q_lora_rank 1536, kv_lora_rank 512,
    # qk_nope_head_dim 128, qk_rope_head_dim 64, v_head_dim 128. s = 4096: the
    # pre-training context (DeepSeek-V3 technical report, arXiv:2412.19437 §4.2).
    "deepseek-v3": _llama(129280, 4096, 61, 7168, 128, 128, 18432)
    | _moe(256, 8, shared_experts=1, expert_ffn=2048, dense_layers=3, mtp=1)
    | {"mla": {"q_rank": 1536, "kv_rank": 512, "nope": 128, "rope": 64, "v": 128}},
}
# --8<-- [end:models]
