"""The sizing calculator on worked examples, and where its anchors disagree.

Checks itself against published figures before it prints: ZeRO's Figure 1 (7.5B on
64 GPUs: 120, 31.4, 16.6, 1.9 GB) and PaLM's 46.2% MFU. Then: Llama 3 8B on 8 H100s
under each ZeRO stage; the bytes a parameter and ZeRO-2 as each source counts them;
the attention FLOPs with and without the causal halving.

    python -m snippets run sizing_examples
"""

from __future__ import annotations

from snippets.core.cli import main_entry
from snippets.core.runtime import Spec, print0
from snippets.sizing import estimate, flops, memory, presets

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


def main() -> dict:
    seven = [
        sum(memory.model_states(7.5e9, 2, 2, 12, s, 64).values()) / 1e9
        for s in range(4)
    ]
    assert [f"{x:.1f}" for x in seven] == ["120.0", "31.4", "16.6", "1.9"], seven
    palm = flops.utilization(
        flops.model_flops_per_token(540.35e9, 118, 48 * 256, 2048),
        238.3e3,
        6144,
        275e12,
    )
    assert f"{palm:.1%}" == "46.2%", palm
    print0("ZeRO Figure 1, 7.5B on 64 GPUs: " + " → ".join(f"{x:.1f}" for x in seven))
    print0(f"PaLM 540B: MFU {palm:.1%} (published 46.2%) ✓")
    tables = {
        "zero_stages": zero_stages(),
        "bytes": bytes_per_parameter(),
        "causal": causal_halving(),
    }
    for row in tables["zero_stages"]:
        print0(
            f"Llama 3 8B, 8 × H100, ZeRO-{row['ZeRO']}: {row['total GB']} GB a GPU, "
            f"MFU {row['MFU']}"
        )
    return {"tables": tables}


if __name__ == "__main__":
    raise SystemExit(main_entry(main, SPEC))
