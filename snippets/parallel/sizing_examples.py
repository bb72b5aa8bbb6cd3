"""The sizing calculator on worked examples, and where its anchors disagree.

Checks itself against published figures before it prints: ZeRO's Figure 1 (7.5B on
64 GPUs: 120, 31.4, 16.6, 1.9 GB) and PaLM's 46.2% MFU. Then: Llama 3 8B on 8 H100s
under each ZeRO stage; the bytes a parameter and ZeRO-2 as each source counts them;
the attention FLOPs with and without the causal halving. Against our own runs, in
this one process: the tiny GPT's parameters, a training step's FLOPs counted by
``FlopCounterMode``, the model states of mixed_precision's bf16 GPT with fp32 Adam
masters, the tensors one layer saves for backward; each must equal the calculator's
prediction plus the difference the row states. And Llama 3 8B beside torchtitan's
measured memory (``benchmarks/llama3_h100_202412_torchtitan.md``, Table 1). Mixtures
of experts: Mixtral 8x7B's and DeepSeek-V3's total and active parameters beside their
published figures, and DeepSeek-V3's memory and all-to-all bytes as ep grows.

    python -m snippets run sizing_examples
"""

from __future__ import annotations

import torch
from torch.utils.flop_counter import FlopCounterMode

from snippets.core.claims import law
from snippets.core.cli import main_entry
from snippets.core.measure import saved_activation_bytes
from snippets.core.runtime import Spec, print0
from snippets.models.tiny_gpt import GPT, GPTConfig, random_batch, reference_attention
from snippets.parallel.sharded.mixed_precision import MasterWeights, held_bytes
from snippets.sizing import activations, estimate, flops, memory, params, presets

SPEC = Spec(summary="the sizing calculator: worked examples and disagreeing anchors")


def zero_stages() -> list[dict]:
    """Llama 3 8B, 8 × H100, s 8192, b 2, selective recompute: each ZeRO stage."""
    rows = []
    for zero in range(4):
        r = estimate.estimate(
            presets.MODELS["llama3-8b"], presets.GPUS["h100-sxm"], dp=8, zero=zero,
            micro_batch=2, recompute="selective",
        )  # fmt: skip
        mem = {k: round(v / 1e9, 1) for k, v in r["memory_bytes"].items()}
        rows.append(
            {"ZeRO": zero, **{f"{k} GB": v for k, v in mem.items()}}
            | {"fits 80 GB": r["fits"], "MFU": f"{r['mfu']:.1%}"}
        )
    return rows


def bytes_per_parameter() -> list[dict]:
    psi, n, k = 7.5e9, 8, memory.optimizer_bytes("bf16-mixed", "adam")

    def ours(g: int, zero: int) -> float:
        return sum(memory.model_states(psi, 2, g, k, zero, n).values()) / psi

    return [
        {"source": "ZeRO paper (fp16 grads)", "DP B/param": ours(2, 0),
         "ZeRO-2 at N = 8": f"2 + 14/N = {ours(2, 2):g}"},
        {"source": "Megatron-LM, ours (fp32 grads)", "DP B/param": ours(4, 0),
         "ZeRO-2 at N = 8": f"2 + 16/N = {ours(4, 2):g}"},
        {"source": "DeepSpeed estimator code", "DP B/param": "-",
         "ZeRO-2 at N = 8": f"2 + 18/N = {2 + 18 / n:g}"},
        {"source": "DeepSpeed memory.rst", "DP B/param": "-",
         "ZeRO-2 at N = 8": f"4 + 16/N = {4 + 16 / n:g}"},
    ]  # fmt: skip


def causal_halving() -> list[dict]:
    """Llama 3 8B at s = 8192 and torchtitan's measured 5,762 tokens/s a GPU."""
    rows = []
    for name, halve in (("torchtitan, PaLM (ours)", False), ("Megatron-LM", True)):
        r = estimate.estimate(
            presets.MODELS["llama3-8b"], presets.GPUS["h100-sxm"], causal_halving=halve
        )
        mfu = flops.utilization(r["flops_per_token"], 5762, 1, 989e12)
        rows.append(
            {"convention": name, "GFLOP/token": round(r["flops_per_token"] / 1e9, 1)}
            | {"MFU at 5,762 tok/s": f"{mfu:.1%}"}
        )
    return rows


def _row(what: str, predicted: float, measured: int, known: float, why: str) -> dict:
    law(predicted + known == measured, (what, predicted, known, measured))
    return {"quantity": what, "calculator": round(predicted), "measured": measured,
            "known difference": round(known), "why": why}  # fmt: skip


def our_runs() -> list[dict]:
    """The tiny GPT measured here, beside the calculator's prediction for it."""
    cfg, tiny, B = GPTConfig(), presets.MODELS["tiny-gpt"], 2
    s, h, a, L = cfg.block_size, cfg.n_embd, cfg.n_head, cfg.n_layer
    N = params.count(tiny)
    model = GPT(cfg)
    rows = [_row("parameters", N, sum(p.numel() for p in model.parameters()), 0, "")]
    for block in model.blocks:  # attention written out: its bmm's are counted
        block.attn.attention = reference_attention
    idx, _ = random_batch(cfg, B, seed=0)  # (B, s)
    with FlopCounterMode(display=False) as counter:
        model(idx, idx)[1].backward()
    n_flop = params.flop_params("gpt", cfg.vocab_size, s, h, True, N)
    per_token = flops.model_flops_per_token(n_flop, L, h, s)
    vectors = sum(p.numel() for p in model.parameters() if p.dim() == 1)
    why = "6N counts biases and norms, not matmuls"
    counted = counter.get_total_flops()
    what = f"FLOPs, one step of {B}×{s} tokens"
    rows.append(_row(what, per_token * B * s, counted, -6 * vectors * B * s, why))
    bf16 = GPT(cfg).to(torch.bfloat16)
    opt = MasterWeights(bf16.parameters(), torch.optim.Adam, lr=1e-3)
    bf16(idx, idx)[1].backward()
    opt.step()
    states = estimate.estimate(tiny, presets.GPUS["h100-sxm"], grad_bytes=2)
    kinds = ("weights", "gradients", "optimizer")
    held = sum(states["memory_bytes"][k] for k in kinds)
    why = "Adam's step counters left out"
    what = "model states, bf16 + fp32 Adam, bytes"
    rows.append(_row(what, held, held_bytes(bf16, opt), 0, why))
    e, block = 8, GPT(cfg).double().blocks[0]  # fp64: 8 bytes a value
    x = torch.randn(B, s, h, dtype=torch.float64, requires_grad=True)
    saved = saved_activation_bytes(lambda: block(x), block)
    layer = activations.layer_bytes("gpt", s, s, B, h, a, a, 4 * h, e)
    known = s * B * (4 * e + a * e - 2 * h)
    why = "+ norm statistics + log-sum-exp - dropout masks"
    rows.append(
        _row("one layer's saved activations, fp64, bytes", layer, saved, known, why)
    )
    return rows


def torchtitan_8b() -> list[dict]:
    """Llama 3 8B, FSDP (ZeRO-3) on 8 GPUs, b 2, s 8192, selective recompute: the
    calculator's parts beside torchtitan's measured peak (GiB → GB)."""
    m = presets.MODELS["llama3-8b"]
    r = estimate.estimate(
        m, presets.GPUS["h100-sxm"], dp=8, zero=3, micro_batch=2, recompute="selective"
    )
    mem, s, b, h, e = r["memory_bytes"], 8192, 2, m["hidden"], 2
    head = activations.head_bytes(s, b, h, m["vocab"], e)
    shape = (m["heads"], m["kv_heads"], m["ffn"], e)
    layers = m["layers"] * activations.layer_bytes(
        "llama", s, s, b, h, *shape, recompute="selective"
    )
    law(
        layers + head == mem["activations"],
        "activations are the layers' plus the head's",
    )
    measured = 82.4 * 2**30  # torchtitan's Table 1, FSDP, eager
    law(
        mem["total"] > measured, "the calculator's total is above the measured peak"
    )  # the note says the calculator is above it
    parts = {
        "model states (2 + 4 + 12 B a parameter, ÷ 8)": mem["total"]
        - mem["activations"] - mem["buffers"],
        f"layers' activations ({m['layers']} layers)": layers,
        "head: norm and head inputs, fp32 logits": head,
        "one gathered layer (ZeRO-3)": mem["buffers"],
        "calculator, total": mem["total"],
        "torchtitan, measured peak reserved (82.4 GiB)": measured,
    }  # fmt: skip
    return [{"part": k, "GB": round(v / 1e9, 1)} for k, v in parts.items()]


# --8<-- [start:moe_examples]
PUBLISHED = {  # billions: (total, active) as their authors print them
    "mixtral-8x7b": (46.7, 12.9),  # Jiang et al. 2024 §2
    "deepseek-v3": (671, 37),  # DeepSeek-V3 technical report, abstract
}


def moe_published() -> list[dict]:
    """Total and active parameters beside the published figures; the test of each
    preset (tests/sizing/test_params.py) says where the difference comes from."""
    rows = []
    for name, (total, active) in PUBLISHED.items():
        c = params.moe_counts(presets.MODELS[name])
        rows.append(
            {"model": name, "total B": round(c["main"] / 1e9, 2),
             "published total B": total, "active B": round(c["active"] / 1e9, 2),
             "published active B": active,
             "MTP module B": round((c["total"] - c["main"]) / 1e9, 2)}
        )  # fmt: skip
    return rows


def moe_expert_parallel() -> list[dict]:
    """DeepSeek-V3 on 64 H100s (dp = 64, ZeRO-1, s = 4096, b = 1) as ep grows."""
    rows = []
    for ep in (1, 8, 64):
        r = estimate.estimate(
            presets.MODELS["deepseek-v3"], presets.GPUS["h100-sxm"], dp=64, ep=ep,
            zero=1,
        )  # fmt: skip
        rows.append(
            {"ep": ep, "experts a GPU B": round(r["expert_params_per_gpu"] / 1e9, 1),
             "memory a GPU GB": round(r["memory_bytes"]["total"] / 1e9, 1),
             "all-to-all a MoE layer GB": round(
                 r["all_to_all_bytes_per_moe_layer"] / 1e9, 3),
             "EP GB a step": round(r["comm_bytes_per_step"]["ep"] / 1e9, 1),
             "DP GB a step": round(r["comm_bytes_per_step"]["dp"] / 1e9, 1)}
        )  # fmt: skip
    return rows


# --8<-- [end:moe_examples]


def main() -> dict:
    seven = [
        sum(memory.model_states(7.5e9, 2, 2, 12, s, 64).values()) / 1e9
        for s in range(4)
    ]
    law([f"{x:.1f}" for x in seven] == ["120.0", "31.4", "16.6", "1.9"], seven)
    palm = flops.utilization(
        flops.model_flops_per_token(540.35e9, 118, 48 * 256, 2048),
        238.3e3,
        6144,
        275e12,
    )
    law(f"{palm:.1%}" == "46.2%", palm)
    print0("ZeRO Figure 1, 7.5B on 64 GPUs: " + " → ".join(f"{x:.1f}" for x in seven))
    print0(f"PaLM 540B: MFU {palm:.1%} (published 46.2%) ✓")
    tables = {
        "zero_stages": zero_stages(),
        "bytes": bytes_per_parameter(),
        "causal": causal_halving(),
        "our_runs": our_runs(),
        "torchtitan": torchtitan_8b(),
        "moe_published": moe_published(),
        "moe_ep": moe_expert_parallel(),
    }
    for row in tables["zero_stages"]:
        print0(
            f"Llama 3 8B, 8 × H100, ZeRO-{row['ZeRO']}: {row['total GB']} GB a GPU, "
            f"MFU {row['MFU']}"
        )
    for row in tables["moe_published"]:
        print0(
            f"{row['model']}: {row['total B']}B total, {row['active B']}B active "
            f"(published {row['published total B']}B, {row['published active B']}B)"
        )
    print0("tiny GPT, calculator + known difference = measured:")
    for row in tables["our_runs"]:
        print0(f"  {row['quantity']}: {row['measured']:,} ✓")
    return {"tables": tables}


if __name__ == "__main__":
    raise SystemExit(main_entry(main, SPEC))
