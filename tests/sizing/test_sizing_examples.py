"""The worked examples: the self-checks pass, and the tables say what the formulas
say (ZeRO shrinks only the model states; the halving removes 6LHQT a token)."""

from __future__ import annotations

from snippets.models.tiny_gpt import GPTConfig
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
    # our runs: each row's measurement is the calculator's plus its stated difference
    cfg, rows = GPTConfig(), tables["our_runs"]
    assert rows[0]["measured"] == cfg.num_params()
    for r in rows:
        assert r["calculator"] + r["known difference"] == r["measured"]
    assert rows[2]["measured"] == 16 * cfg.num_params()  # the ZeRO paper's 16Ψ
    # Llama 3 8B: the parts add up to the total; torchtitan's 82.4 GiB in GB
    gb = {r[""]: r["GB"] for r in tables["torchtitan"]}
    total = gb.pop("calculator, total")
    measured = gb.pop("torchtitan, measured peak reserved (82.4 GiB)")
    assert abs(sum(gb.values()) - total) < 0.2 and measured == 88.5
