"""The snippet's own checks pass on the real export and fail on a wrong one."""

from __future__ import annotations

import copy

import pytest

from snippets.viewer.model_viewer import check, tiny_gpt_inputs


def test_checks_pass_on_the_export(tiny) -> None:
    model, args, graph = tiny
    seen = check(model, args, graph)
    assert seen["params"] == sum(p.numel() for p in model.parameters())
    assert tiny_gpt_inputs()[0].shape == (1, model.config.block_size)


@pytest.mark.parametrize("break_it", ["flops", "shape", "module"])
def test_checks_fail_on_a_wrong_graph(tiny, break_it) -> None:
    model, args, graph = tiny
    bad = copy.deepcopy(graph)
    op = next(o for o in bad["ops"] if o["op"] == "aten.linear")
    if break_it == "flops":
        op["flops"] += 1
    elif break_it == "shape":
        op["out"][0]["shape"][-1] += 1
    else:
        bad["modules"].pop()
    with pytest.raises(AssertionError):
        check(model, args, bad)
