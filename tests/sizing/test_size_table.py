"""The people's table: the estimate's numbers, rounded, in lines of 88 columns."""

from __future__ import annotations

from snippets.sizing import estimate, presets
from snippets.sizing.size_table import gb, presets_table, table


def test_table_shows_the_estimate() -> None:
    r = estimate.estimate(
        presets.MODELS["llama3-70b"], presets.GPUS["h200"], dp=2, tp=8, pp=4, vpp=2,
        global_batch=16, zero=1, sequence_parallel=True, recompute="full",
    )  # fmt: skip
    r["inputs"] |= {"preset": "llama3-70b", "gpu_name": "h200"}
    text = table(r)
    assert gb(r["memory_bytes"]["total"]) in text
    assert f"{r['tokens_per_s']:,.0f} tokens/s" in text
    assert f"MFU {r['mfu']:.1%}" in text
    assert ("does NOT fit" in text) != r["fits"]
    assert "llama3-70b on 64 × h200" in text
    assert max(len(line) for line in (text + presets_table()).splitlines()) <= 88
    assert gb(1.5e9) == "1.50 GB"


def test_the_table_says_what_zero3_holds_and_why_an_answer_is_absurd() -> None:
    r = estimate.estimate(
        presets.MODELS["llama3-8b"], presets.GPUS["h100-sxm"], dp=4, zero=3,
        micro_batch=100_000,
    )  # fmt: skip
    text = table(r)
    assert "parameters: 8,030,261,248 in all" in text
    shard = "8,030,261,248 in a GPU's TP×PP shard"
    assert f"{shard}, 2,007,565,312 held under ZeRO-3" in text  # a quarter
    # the one warning, wrapped at 88 columns under a "! ", ends the table
    wrapped = " ".join(line[2:] for line in ("  " + text.split("\n! ")[1]).splitlines())
    assert wrapped == r["warnings"]["memory_bytes"]
    assert max(len(line) for line in text.splitlines()) <= 88
    h200 = presets.GPUS["h200"]
    one = table(estimate.estimate(presets.MODELS["llama3-8b"], h200, dp=2, zero=1))
    assert "held under ZeRO-3" not in one and "\n! " not in one
