"""The overlay's bytes against the sizing calculator's estimate(), which reads the
model's dimensions, not the graph; and against hand counts from the parameters."""

from __future__ import annotations

import itertools

import pytest

from snippets.models.tiny_gpt import GPTConfig
from snippets.sizing import presets
from snippets.viewer.overlay_bytes import calculator, collectives, held, rank_bytes
from snippets.viewer.parallel_overlay import Degrees

COLUMN_SPLIT = ("attn.q.", "attn.k.", "attn.v.", "mlp.fc.", "tok_emb.")  # all of it
ROW_SPLIT = ("attn.proj.weight", "mlp.proj.weight")  # the weight, not the bias
STATES = {"weights": "weights", "grads": "gradients", "optimizer": "optimizer"}


@pytest.mark.parametrize(
    "dp, tp, pp, cp, zero, sp",
    [
        (1, 1, 1, 1, 0, False),
        (2, 2, 2, 1, 1, False),
        (2, 2, 1, 2, 3, True),
        (1, 2, 2, 2, 2, True),
        (4, 1, 2, 1, 3, False),
        (8, 2, 2, 2, 0, True),
    ],
)
def test_overlay_equals_estimate(tiny, dp, tp, pp, cp, zero, sp) -> None:
    _, args, graph = tiny
    d = Degrees(dp, tp, pp, cp, zero, sp)
    want = calculator(presets.MODELS["tiny-gpt"], args[0].shape[1], d)
    rows = rank_bytes(graph, d)
    top = max(rows, key=lambda r: r["weights"])  # estimate: the most loaded GPU
    mem = want["memory_bytes"]
    for col, key in STATES.items():
        assert top[col] == pytest.approx(mem[key], rel=1e-12), col
    assert top["buffers"] == pytest.approx(mem["buffers"], rel=1e-12)
    comm = want["comm_bytes_per_step"]
    for kind in ("tp", "cp", "dp"):  # each stage's TP and CP; dp of the top one
        assert top[kind] == pytest.approx(comm[kind], rel=1e-12), kind
    assert rows[0]["pp"] == pytest.approx(comm["pp"], rel=1e-12)  # one boundary


def test_bytes_per_rank_by_hand(tiny) -> None:
    model, _, graph = tiny
    named = list(model.named_parameters())
    split = sum(
        p.numel()
        for n, p in named
        if n.endswith(ROW_SPLIT) or any(k in n for k in COLUMN_SPLIT)
    )
    full = sum(p.numel() for _, p in named)
    for tp, dp, zero in itertools.product((1, 2), (1, 2), (0, 1, 2, 3)):
        (row,) = rank_bytes(graph, Degrees(dp=dp, tp=tp, zero=zero))
        local = full - split + split / tp  # fp32 values on one TP rank
        assert row["weights"] == pytest.approx(4 * local / (dp if zero == 3 else 1))
        assert row["grads"] == pytest.approx(4 * local / (dp if zero >= 2 else 1))
        assert row["optimizer"] == pytest.approx(8 * local / (dp if zero else 1))
    # two stages: the last keeps its own copy of the tied embedding (Megatron)
    cfg = GPTConfig()
    two = rank_bytes(graph, Degrees(pp=2))
    one = rank_bytes(graph, Degrees())[0]
    copy = cfg.vocab_size * cfg.n_embd * 4
    assert two[0]["weights"] + two[1]["weights"] == one["weights"] + copy
    assert {m["id"] for m, s, *_ in held(graph, Degrees(pp=2)) if s == 1} >= {"lm_head"}
    assert "lm_head" not in {m["id"] for m, *_ in held(graph, Degrees())}


def test_collectives_where_they_fire(tiny) -> None:
    _, args, graph = tiny
    cfg, (B, N) = GPTConfig(), args[0].shape
    act = B * N * cfg.n_embd * 4  # one fp32 activation (B, N, d)
    ops = {op["id"]: op for op in graph["ops"]}
    tp = collectives(graph, Degrees(tp=2))
    # 4 a layer: after attn.proj and mlp.proj (forward), at the input q, k, v share
    # and at fc's (backward); a ring all-reduce sends 2(n-1)/n of its buffer
    assert len(tp) == 4 * cfg.n_layer and all(c["bytes"] == act for c in tp)
    rows = {ops[c["at"]]["module"].split(".", 2)[2] for c in tp}
    assert rows == {"attn.proj", "mlp.proj", "ln1", "ln2"}
    sp = collectives(graph, Degrees(tp=4, sp=True))
    assert {c["name"].split(" ")[0] for c in sp} == {"all-gather", "reduce-scatter"}
    assert all(c["bytes"] == 2 * act * 3 / 4 for c in sp)  # AG + RS, (n-1)/n each
    pp = collectives(graph, Degrees(pp=2))
    assert [(c["kind"], c["stage"], c["bytes"]) for c in pp] == [("pp", 0, 2 * act)]
    assert ops[pp[0]["at"]]["module"].startswith("blocks.0")
    dp = collectives(graph, Degrees(dp=2, zero=3))
    psi = cfg.num_params()  # the ZeRO paper's 3Ψ, a ring sending (n-1)/n of it
    assert sum(c["bytes"] for c in dp) == pytest.approx(3 * 4 * psi / 2)
    cp = [c for c in collectives(graph, Degrees(cp=2)) if c["kind"] == "cp"]
    # K and V halves, one hop forward, K, V, dK, dV backward: 3 hops of 2·act/2
    assert len(cp) == cfg.n_layer and all(c["bytes"] == 3 * act for c in cp)
    assert collectives(graph, Degrees()) == []
