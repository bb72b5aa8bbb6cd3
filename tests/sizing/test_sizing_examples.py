"""The worked examples: the self-checks pass, and the tables say what the formulas
say (ZeRO shrinks only the model states; the halving removes 6LHQT a token)."""

from __future__ import annotations

from snippets.sizing import sizing_examples


def test_main_tables() -> None:
    tables = sizing_examples.main()["tables"]
    stages = tables["zero_stages"]
    totals = [r["total GB"] for r in stages]
    assert totals == sorted(totals, reverse=True) and len(set(totals)) == 4
    assert len({r["activations GB"] for r in stages}) == 1  # ZeRO leaves them alone
    full, halved = (r["GFLOP/token"] for r in tables["causal"])
    assert abs((full - halved) - 6 * 32 * 4096 * 8192 / 1e9) < 0.1
    assert [r["DP B/param"] for r in tables["bytes"][:2]] == [16, 18]
