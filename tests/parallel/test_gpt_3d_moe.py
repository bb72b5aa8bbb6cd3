"""The 3D GPT with mixture-of-experts blocks at four ranks, one launch: gpt_3d_moe's
three meshes, experts split over ep = 2 beside data parallel (dp 4 = 2 replicas of
each expert × ep 2), tensor and sequence parallel (dp 2 × tp 2, ep 2) and the
pipeline (dp 2 × pp 2, ep 2). Each run's losses equal a one-process run made here,
in the test, whose loss is the cross-entropy plus α times every block's balance
loss, each sequence's the Switch auxiliary loss of ``moe.route`` on that sequence
alone. In the same launch: a rank holds E/ep experts and sends rows to its ep peer;
``gpt_3d --experts --json`` records the losses; the check fails when the balance
loss's gradient, its value, or the ep-aware division of expert gradients is left
out. Bad flags are one line and exit 2."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import io
import json

import pytest
import torch
import torch.distributed as dist
import torch.nn.functional as F
from conftest import refused

from snippets.core.runtime import UsageError, launch
from snippets.models.moe import route
from snippets.models.tiny_gpt import GPT, random_batch
from snippets.parallel import gpt_3d, gpt_3d_model, gpt_3d_moe
from snippets.parallel.experts.expert_parallel import ExpertParallelMoE
from snippets.parallel.mesh import Mesh

E, K, STEPS = 4, 2, 2
SHAPES = [dict(zip(("dp", "pp", "tp"), s)) for s in gpt_3d_moe.SHAPES.values()]
CFG = dataclasses.replace(gpt_3d.CFG, num_experts=E, top_k=K)


def runs() -> dict:
    out = {"runs": [], "experts": [], "sent": []}
    build = gpt_3d.rank_model

    def built(*args, **kwargs):  # what each rank holds, and what it sends
        model = build(*args, **kwargs)
        layers = [m for m in model.modules() if isinstance(m, ExpertParallelMoE)]
        out["experts"].append(sorted(int(e) for m in layers[:1] for e in m.experts))
        out["sent"].append([m.comm for m in layers])
        return model

    gpt_3d.rank_model = built
    out["main"] = gpt_3d_moe.main(E, K, steps=STEPS)
    gpt_3d.rank_model = build
    text = io.StringIO()
    with contextlib.redirect_stdout(text):  # --json: rank 0 prints one object
        gpt_3d.main(2, 2, 1, 1, steps=1, experts=E, top_k=K, ep=2, as_json=True)
    out["json"] = text.getvalue()
    data, mesh = [random_batch(CFG, 8)], Mesh(2, 2, 1, 1, ep=2)
    train = functools.partial(gpt_3d.train, mesh, "1f1b", 2, 1, data, torch.float64)

    def mistake(name, obj, attr, wrong, on=mesh):
        right = getattr(obj, attr)
        setattr(obj, attr, wrong)
        rows, d_params = gpt_3d.train(on, "1f1b", 2, 1, data, torch.float64, "adam",
                                      True, CFG)  # fmt: skip
        out[name] = gpt_3d.failures(rows, d_params, 1e-10)
        setattr(obj, attr, right)

    no_grad = staticmethod(lambda ctx, dy: (dy, None))
    mistake("no_aux_gradient", gpt_3d_model.AddToLoss, "backward", no_grad)
    mistake("no_aux_value", gpt_3d, "balance_value", lambda *args: 0.0)
    real = gpt_3d_model.reduce_grads  # divide by the group's size, as DDP does

    def averaged(params, group, divisor):
        return real(params, group, dist.get_world_size(group))

    wide = Mesh(4, 1, 1, 1, ep=2)  # the experts' group has 2 ranks, dp 4
    mistake("ep_unaware_mean", gpt_3d_model, "reduce_grads", averaged, on=wide)
    rows, _ = train("adam", True, CFG)  # and all is well again
    out["again"] = rows
    return out


@pytest.fixture(scope="module")
def ranks() -> list[dict]:
    return launch(runs, 4, "gloo", timeout_s=240)


@functools.cache
def one_process() -> list[float]:
    """The oracle, here: cross-entropy + α Σ over blocks of the mean over sequences
    of Switch's auxiliary loss, taken by ``moe.route`` on each sequence alone."""
    model = GPT(CFG).double()
    opt = torch.optim.Adam(model.parameters(), **gpt_3d.OPTIMIZERS["adam"][1])
    losses = []
    for idx, targets in [random_batch(CFG, 8)] * STEPS:
        x, aux = model.embed(idx), 0.0
        for block in model.blocks:
            x = x + block.attn(block.ln1(x))
            h = block.ln2(x)
            rows = [route(block.mlp.router, row, K, None).aux_loss for row in h]
            aux = aux + torch.stack(rows).mean()
            x = x + block.mlp(h)
        logits = model.head(x)
        loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten())
        loss = loss + CFG.aux_loss_coef * aux
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def test_every_expert_parallel_shape_trains_like_one_process(ranks) -> None:
    oracle = one_process()
    runs = ranks[0]["main"]["runs"]
    assert [r["mesh"] for r in runs] == list(gpt_3d_moe.SHAPES)
    for run in runs:
        torch.testing.assert_close(run["losses"], oracle, rtol=1e-10, atol=0)
        torch.testing.assert_close(run["reference_losses"], oracle, rtol=1e-10, atol=0)
        assert run["losses"][-1] < run["losses"][0]  # the steps trained it
        assert all(float(run[k]) <= 1e-10 for k in ("max Δ grads", "Δ params"))


def test_json_has_the_losses_and_the_expert_settings(ranks) -> None:
    record = json.loads(ranks[0]["json"])
    torch.testing.assert_close(record["losses"], one_process()[:1], rtol=1e-10, atol=0)
    assert record["mesh"] == {"dp": 2, "pp": 2, "cp": 1, "tp": 1, "ep": 2,
                              "world_size": 4}  # fmt: skip
    assert (record["experts"], record["top_k"], record["aux_loss_coef"]) == (E, K, 0.01)


def test_each_rank_holds_half_the_experts_and_sends_rows_to_its_peer(ranks) -> None:
    for i, kw in enumerate(SHAPES):  # ep_rank = dp_rank mod 2
        held = [r["experts"][i] for r in ranks]
        for rank, experts in enumerate(held):
            dp_rank = rank // (kw["pp"] * kw["tp"])
            assert experts == ([0, 1] if dp_rank % 2 == 0 else [2, 3]), (i, held)
        sent = [c["forward"] for r in ranks for c in r["sent"][i]]
        assert sent and all(n > 0 for n in sent), (i, sent)  # every layer, every rank


def test_the_check_catches_each_mistake(ranks) -> None:
    result = ranks[0]
    for mistake, what in (("no_aux_gradient", "d_grads"), ("no_aux_value", "d_loss"),
                          ("ep_unaware_mean", "d_grads")):  # fmt: skip
        assert any(what in f for f in result[mistake]), (mistake, result[mistake])
    assert gpt_3d.failures(result["again"], 0.0, 1e-10) == []


BAD = [
    ({"dp": 4, "pp": 1, "tp": 1, "experts": 4, "top_k": 5}, "--top-k must be 1 to 4"),
    ({"dp": 4, "pp": 1, "tp": 1, "experts": 4, "top_k": 0}, "--top-k must be 1 to 4"),
    ({"dp": 1, "pp": 2, "tp": 2, "experts": 3, "ep": 2}, "3 experts do not split"),
    ({"dp": 1, "pp": 2, "tp": 2, "experts": 4, "ep": 2}, "--ep 2 does not divide dp"),
    ({"dp": 4, "pp": 1, "tp": 1, "ep": 2}, "--ep and --top-k need --experts"),
    ({"dp": 2, "pp": 1, "tp": 1, "experts": 4, "ep": 2}, "= 2 but the world has 4"),
]


@pytest.mark.parametrize("kw, words", BAD, ids=[w for _, w in BAD])
def test_bad_expert_shapes_are_usage_errors(kw, words) -> None:
    kw = {"ep": 1, "experts": 0, "top_k": 1, **kw}
    shape = (4, kw["dp"], kw["pp"], 1, kw["tp"], gpt_3d.CFG, 8, 2, 1, "1f1b", True)
    with pytest.raises(UsageError, match=words):
        gpt_3d.check_shape(*shape, kw["ep"], kw["experts"], kw["top_k"])


@pytest.mark.parametrize(
    "flags, words",
    [(["--top-k", "0"], "--top-k: must be at least 1"),
     (["--top-k", "5"], "--top-k must be 1 to 4"),
     (["--experts", "3", "--ep", "2"], "3 experts do not split over --ep 2"),
     (["--ep", "2"], "--ep 2 does not divide dp = 1"),
     (["--dp", "3"], "= 3 but the world has 1 ranks")],
)  # fmt: skip
def test_bad_flags_are_one_line_and_exit_2(flags, words, capfd) -> None:
    argv = ["run", "gpt_3d", "-n", "1", "--pp", "1", "--tp", "1", "--experts", "4"]
    # refused in this process, as rank 0 of 1, or by the parser itself
    assert words in refused([*argv, *flags], capfd)


def test_the_three_meshes_need_four_ranks(capfd) -> None:
    assert "at least 4" in refused(["run", "gpt_3d_moe", "-n", "2"], capfd)
