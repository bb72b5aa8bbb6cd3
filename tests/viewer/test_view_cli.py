"""``python -m snippets view``: a page for a ready-made target and for a user's own
model; every kind of bad input is one line and exit status 2."""

from __future__ import annotations

import json

import pytest
import torch
from conftest import refused

from snippets.__main__ import main


def two_layers() -> torch.nn.Module:  # a user's own model, as the CLI will import it
    return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.GELU())


def not_a_module() -> int:
    return 3


def example() -> torch.Tensor:
    return torch.ones(2, 4)


def read_graph(folder, name: str = "MODEL_GRAPH") -> dict | None:
    """A ``window.NAME = {...};`` line of graph.js, as JSON (None if none)."""
    for line in (folder / "graph.js").read_text(encoding="utf-8").splitlines():
        if line.startswith(f"window.{name} = "):
            return json.loads(line.removeprefix(f"window.{name} = ").rstrip(";"))
    return None


def test_ready_made_and_own_model_pages(tmp_path, capsys) -> None:
    assert main(["view", "llama_block", "--out", str(tmp_path / "a")]) == 0
    out = capsys.readouterr().out
    assert f"page: {(tmp_path / 'a' / 'index.html').resolve()}" in out
    assert all(len(line) <= 88 for line in out.splitlines() if "page:" not in line)
    assert read_graph(tmp_path / "a")["model"] == "LlamaBlock"
    argv = ["view", "test_view_cli:two_layers", "--example", "test_view_cli:example"]
    assert main([*argv, "--out", str(tmp_path / "b")]) == 0
    graph = read_graph(tmp_path / "b")
    assert [op["op"] for op in graph["ops"]] == ["aten.linear", "aten.gelu"]
    assert graph["ops"][0]["out"][0]["shape"] == [2, 8]
    assert graph["modules"][0]["params"] == 4 * 8 + 8
    assert "tp" in graph["modules"][1] and "stack" in graph  # overlay annotations


def test_a_model_with_experts_opens_at_the_degrees_given(tmp_path, capsys) -> None:
    argv = ["view", "tiny_moe_gpt", "--dp", "4", "--tp", "2", "--ep", "2", "--sp"]
    assert main([*argv, "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert all(len(line) <= 88 for line in out.splitlines() if "page:" not in line)
    said = " ".join(out.split())  # the sentence, wrapped at 88 columns
    assert "of 4 experts, EP rank 0: 0-1, EP rank 1: 2-3" in said
    assert read_graph(tmp_path, "MODEL_VIEW_START") == {
        "dp": 4, "tp": 2, "sp": 1, "ep": 2
    }  # fmt: skip
    moe = {m["id"]: m for m in read_graph(tmp_path)["modules"]}["blocks.1.mlp"]
    assert moe["moe"] == {"experts": [f"blocks.1.mlp.experts.{e}" for e in range(4)],
                          "top_k": 2}  # fmt: skip
    assert main(["view", "tiny_gpt", "--out", str(tmp_path)]) == 0  # no degrees
    assert read_graph(tmp_path, "MODEL_VIEW_START") is None


def test_models_nobody_here_wrote(tmp_path, capsys) -> None:
    """A shared submodule and nn.Transformer with a causal mask (test_module_graph)."""
    argv = ["view", "test_module_graph:SharedBlocks", "--input-shape", "2,5,8"]
    assert main([*argv, "--out", str(tmp_path / "a")]) == 0
    shared = {m["id"]: m for m in read_graph(tmp_path / "a")["modules"]}["shared"]
    assert shared["aliases"] == ["blocks.0"]
    capsys.readouterr()
    argv = ["view", "test_module_graph:transformer"]
    argv += ["--example", "test_module_graph:transformer_inputs"]
    assert main([*argv, "--out", str(tmp_path / "b")]) == 0
    out = capsys.readouterr().out
    assert "at module level: no tracer: fails at transformer.py" in out
    assert all(len(line) <= 88 for line in out.splitlines() if "page:" not in line)
    graph = read_graph(tmp_path / "b")
    assert graph["level"] == "module" and "stack" in graph  # overlay annotations
    assert [i["id"] for i in graph["inputs"]] == ["src", "tgt", "tgt_mask"]


@pytest.mark.parametrize(
    "argv, says",
    [
        (["no_such_pkg.mod:f", "--input-shape", "1,4"], "cannot import"),
        (["test_view_cli:missing", "--input-shape", "1,4"], "has no"),
        (["test_view_cli:not_a_module", "--input-shape", "1,4"], "not a module"),
        (["test_view_cli:two_layers", "--input-shape", "1,x"], "whole number"),
        (["test_view_cli:two_layers", "--input-shape", "0,4"], "at least 1"),
        (["test_view_cli:two_layers", "--input-shape", "1,5"], "cannot run"),
        (["test_view_cli:two_layers"], "--input-shape or --example"),
        (["two_layers", "--input-shape", "1,4"], "package.module:name"),
        (["tiny_moe_gpt", "--dp", "2", "--ep", "4"], "ep 4 does not divide dp = 2"),
        (["tiny_gpt", "--dp", "2", "--ep", "2"], "needs a model with experts"),
        (["tiny_gpt", "--dp", "3"], "invalid choice"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(argv, says, capfd, tmp_path) -> None:
    assert says in refused(["view", *argv, "--out", str(tmp_path)], capfd)
