"""The 3D GPT at four ranks, one launch for five mesh shapes (dp2×pp2 zero-bubble,
pp2×tp2 interleaved with sequence parallel, dp2×tp2 fp32 SGD tensor parallel only,
pp2×tp2 zero-bubble with sequence parallel, pp2×cp2): each run's losses equal a
single process trained here, in the test, on the same batches. In the same launch:
with tp > 1 the loss sees logits cut to V/t and nothing gathers them; under
sequence parallel the blocks are the sequence-parallel ones; zero-bubble's W
actions do weight-gradient work on every rank; the snippet's own check fails when
the data-parallel average or the sequence-parallel LayerNorm sum is left out. Bad
shapes are one UsageError line, exit 2; a run outside the tolerance raises."""

from __future__ import annotations

import contextlib
import functools
import io
import json

import pytest
import torch
from conftest import refused

from snippets.core.runtime import UsageError, launch
from snippets.models.tiny_gpt import GPT, GPTConfig, random_batch
from snippets.parallel import gpt_3d, gpt_3d_model
from snippets.parallel.mesh import Mesh
from snippets.parallel.pipeline import pipeline_weight_grad
from snippets.parallel.tensor.sequence_parallel import SequenceParallelAttention
from snippets.parallel.tensor.tensor_parallel import GatherLastDim

SHAPES = [
    {"dp": 2, "pp": 2, "tp": 1, "schedule": "zb-h1"},
    {"dp": 1, "pp": 2, "tp": 2, "schedule": "interleaved"},  # v = 2, SP
    {"dp": 2, "pp": 1, "tp": 2, "optimizer": "sgd", "dtype": "float32",
     "sequence_parallel": False},
    {"dp": 1, "pp": 2, "tp": 2, "schedule": "zb-h1"},  # SP
    {"dp": 1, "pp": 2, "cp": 2, "tp": 1},
]  # fmt: skip
STEPS = 2


def spies() -> dict:
    """Record the loss's logits widths and the W actions' products; no gathers."""
    seen = {"widths": [], "products": 0, "sp_blocks": 0}
    loss, run, build = (
        gpt_3d_model.vocab_parallel_cross_entropy,
        pipeline_weight_grad.WeightGradients.run,
        gpt_3d_model.rank_model,
    )

    def watched_loss(logits, targets, group=None):
        seen["widths"].append(logits.shape[-1])
        return loss(logits, targets, group)

    def counted(store, key):
        seen["products"] += (n := run(store, key))
        return n

    def built(*args, **kwargs):
        model = build(*args, **kwargs)
        blocks = [getattr(b, "attn", None) for b in model.blocks]
        seen["sp_blocks"] += sum(
            isinstance(a, SequenceParallelAttention) for a in blocks
        )
        return model

    def gathered(*args):
        raise AssertionError("the logits were gathered")

    gpt_3d_model.vocab_parallel_cross_entropy = watched_loss
    pipeline_weight_grad.WeightGradients.run = counted
    gpt_3d.rank_model = built
    GatherLastDim.forward = staticmethod(gathered)
    return seen


def runs() -> dict:
    out, seen = {"runs": [], "seen": []}, spies()
    for kw in SHAPES[:-1]:
        out["runs"].append(gpt_3d.main(steps=STEPS, **kw))
        out["seen"].append(dict(seen, widths=sorted(set(seen["widths"]))))
        seen.update(widths=[], products=0, sp_blocks=0)
    text = io.StringIO()
    with contextlib.redirect_stdout(text):  # --json: rank 0 prints one object
        out["runs"].append(gpt_3d.main(steps=STEPS, as_json=True, **SHAPES[-1]))
    out["json"] = text.getvalue()
    data, mesh = [random_batch(gpt_3d.CFG, 8)], Mesh(2, 1, 1, 2)
    gpt_3d_model.allreduce_sequence_grads = lambda model, group: None  # a mistake
    rows, d_params = gpt_3d.train(mesh, "1f1b", 2, 1, data, torch.float64, "sgd")
    out["no_sequence_sum"] = gpt_3d.failures(rows, d_params, 1e-10)
    gpt_3d.average_gradients = lambda *args: None  # and another, on purpose
    rows, d_params = gpt_3d.train(
        mesh, "1f1b", 2, 1, data, torch.float64, "sgd", sp=False
    )
    out["no_average"] = gpt_3d.failures(rows, d_params, 1e-10)
    return out


@pytest.fixture(scope="module")
def ranks() -> list[dict]:
    return launch(runs, 4, "gloo", timeout_s=180)


@pytest.fixture(scope="module")
def result(ranks) -> dict:
    return ranks[0]


@functools.cache
def one_process(optimizer: str, dtype: torch.dtype) -> list[float]:
    """The oracle, here: the dense GPT on the whole batch, torch's optimizer."""
    model = GPT(gpt_3d.CFG).to(dtype)
    make, kwargs = gpt_3d.OPTIMIZERS[optimizer]
    opt = make(model.parameters(), **kwargs)
    losses = []
    for idx, targets in [random_batch(gpt_3d.CFG, 8)] * STEPS:
        opt.zero_grad()
        loss = model(idx, targets)[1]
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def test_every_shape_trains_like_one_process(result) -> None:
    for kw, run in zip(SHAPES, result["runs"]):
        dtype = gpt_3d.DTYPES[kw.get("dtype", "float64")]
        tol = {torch.float64: 1e-10, torch.float32: 1e-5}[dtype]
        oracle = one_process(kw.get("optimizer", "adam"), dtype)
        torch.testing.assert_close(run["losses"], oracle, rtol=tol, atol=0)
        torch.testing.assert_close(run["reference_losses"], oracle, rtol=tol, atol=0)
        assert run["losses"][-1] < run["losses"][0]  # the steps trained it
        assert all(r["d_grads"] <= tol for r in run["tables"]["steps"])
        assert run["max_param_difference"] <= tol
        sizes = {"dp": 1, "pp": 2, "cp": 1, "tp": 2, **kw}
        assert run["mesh"] == {k: sizes[k] for k in ("dp", "pp", "cp", "tp")} | {
            "world_size": 4
        }
    assert result["runs"][1]["chunks"] == 2
    sp = [r["sequence_parallel"] for r in result["runs"]]
    assert sp == [False, True, False, True, False]


def test_tensor_parallel_uses_the_vocab_parallel_loss_and_sequence_parallel(
    ranks,
) -> None:
    V, L = gpt_3d.CFG.vocab_size, gpt_3d.CFG.n_layer
    for i, kw in enumerate(SHAPES[:-1]):
        tp, pp = kw["tp"], kw["pp"]
        widths = [r["seen"][i]["widths"] for r in ranks]
        if tp == 1:  # the executor's own dense cross-entropy
            assert widths == [[]] * 4, (i, widths)
        else:  # on the last stage's ranks only, never the whole vocabulary
            assert sorted(widths) == [[]] * (4 - 4 // pp) + [[V // tp]] * (4 // pp)
        sp = kw.get("sequence_parallel", True) and tp > 1
        blocks = sum(r["seen"][i]["sp_blocks"] for r in ranks)
        assert blocks == (4 // pp * L if sp else 0), (i, blocks)


def test_zero_bubble_w_does_weight_gradient_work_on_every_rank(ranks) -> None:
    for i in (0, 3):  # dp2×pp2 dense and pp2×tp2 sequence parallel
        assert all(r["seen"][i]["products"] > 0 for r in ranks), i
    assert all(r["seen"][1]["products"] == 0 for r in ranks)  # interleaved: no W


def test_json_is_one_object_with_the_losses(result) -> None:
    record = json.loads(result["json"])
    assert record["losses"] == result["runs"][-1]["losses"]
    assert len(record["reference_losses"]) == STEPS
    assert record["mesh"]["cp"] == 2


def test_the_check_catches_a_missing_average_or_sequence_sum(result) -> None:
    for mistake in ("no_average", "no_sequence_sum"):
        assert any("d_grads" in f for f in result[mistake]), result[mistake]


CFG = GPTConfig(n_layer=4, n_head=4)


@pytest.mark.parametrize(
    "args, words",
    [
        ((8, 3, 2, 1, 2, CFG, 8, 2, 1, "1f1b"), "= 12 but the world has 8"),
        ((8, None, 3, 1, 2, CFG, 8, 2, 1, "1f1b"), "not a multiple of pp·cp·tp"),
        ((6, 1, 1, 2, 3, CFG, 8, 2, 1, "1f1b"), "n_head=4 is not divisible"),
        ((3, 1, 3, 1, 1, CFG, 8, 2, 1, "1f1b"), "4 layers do not split"),
        ((4, 1, 2, 1, 2, CFG, 8, 2, 4, "interleaved"), "pp·v = 2·4"),
        ((4, 2, 2, 1, 1, CFG, 6, 2, 1, "1f1b"), "--batch 6 is not divisible"),
        ((4, 1, 1, 4, 1, GPTConfig(block_size=12), 8, 2, 1, "1f1b"), "2·cp = 8"),
        ((4, 1, 2, 1, 2, CFG, 6, 3, 2, "interleaved"), "m=3 must be a multiple"),
        ((32, 1, 1, 8, 4, CFG, 8, 2, 1, "1f1b"), "cuts a rank's 2 tokens in --tp 4"),
    ],
)
def test_bad_shapes_are_usage_errors(args, words) -> None:
    with pytest.raises(UsageError, match=words):
        gpt_3d.check_shape(*args)
    assert gpt_3d.check_shape(8, None, 2, 1, 2, CFG, 8, 2, 1, "1f1b") == 2
    assert gpt_3d.check_shape(32, 1, 1, 8, 4, CFG, 8, 2, 1, "1f1b", False) == 1


def test_bad_input_is_one_line_and_exit_2(capfd) -> None:
    line = refused(["run", "gpt_3d", "-n", "1", "--tp", "3"], capfd)  # in this process
    assert "not a multiple" in line
    line = refused(["run", "gpt_3d", "--schedule", "2f2b"], capfd)  # by the parser
    assert "invalid choice" in line


def test_a_run_beyond_the_tolerance_fails(monkeypatch) -> None:
    monkeypatch.setitem(gpt_3d.TOLERANCE, torch.float64, -1.0)  # nothing can pass
    with pytest.raises(AssertionError, match="3D run ≠ one process"):
        launch(gpt_3d.main, 1, "gloo", 60, args=(1, 1, 1, 1, "1f1b", None, 1, 2, 1))
