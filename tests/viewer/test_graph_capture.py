"""A model neither tracer can capture: one line naming its line and both tracers."""

from __future__ import annotations

import pytest
import torch
from conftest import refused

from snippets.__main__ import main
from snippets.core.errors import UsageError
from snippets.viewer.graph_capture import capture, first_line


class DataDependent(torch.nn.Module):
    def forward(self, x):
        if x.sum() > 0:  # a branch on a value: neither export nor fx can follow it
            return x * 2
        return x


def test_untraceable_model_is_one_line_naming_the_line_and_both_tracers() -> None:
    with pytest.raises(UsageError) as err:
        capture(DataDependent(), (torch.ones(3),))
    text = str(err.value)
    assert "\n" not in text
    assert "if x.sum() > 0:" in text and "test_graph_capture.py" in text
    assert "torch.export:" in text and "torch.fx:" in text


def test_through_the_cli_a_tracer_asked_for_is_exit_2_auto_falls_back(
    capfd, tmp_path
) -> None:
    argv = ["view", "test_graph_capture:DataDependent", "--input-shape", "3"]
    line = refused([*argv, "--method", "fx", "--out", str(tmp_path)], capfd)
    assert line.startswith("error: cannot capture")
    assert main([*argv, "--out", str(tmp_path)]) == 0  # runs eagerly: module level
    out = capfd.readouterr().out
    assert "at module level:" in out and "if x.sum() > 0:" in out


def test_capture_returns_the_tracer_that_worked() -> None:
    lin = torch.nn.Linear(2, 3)
    gm, values, inputs, source = capture(lin, (torch.ones(1, 2),), "fx")
    assert source == "torch.fx" and len(inputs) == len(values) == 1
    assert capture(lin, (torch.ones(1, 2),))[3] == "torch.export"


def test_first_line_is_short() -> None:
    assert first_line(ValueError("a. b\nc")) == "a"
    assert len(first_line(ValueError("x" * 500))) == 90
