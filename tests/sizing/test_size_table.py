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
