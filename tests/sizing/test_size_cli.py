"""``python -m snippets size``: the JSON fields, the table, and one line with exit
status 2 for each impossible input. In process (``snippets.__main__.main``), plus one
real subprocess for the command itself."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import REPO, refused

from snippets.__main__ import main
from snippets.sizing import estimate, presets

REQUIRED = {
    "params", "memory_bytes", "flops_per_token", "comm_bytes_per_step",
    "step_time_s", "tokens_per_s", "mfu", "fits",
}  # fmt: skip


def size_json(capsys, *args: str) -> dict:
    assert main(["size", *args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_json_fields_equal_the_estimate(capsys) -> None:
    args = "--preset llama3-8b --seq 4096 --micro-batch 2 --dp 4 --tp 2 --zero 3"
    found = size_json(capsys, *args.split(), "--recompute", "selective")
    assert REQUIRED <= set(found)
    assert set(found["memory_bytes"]) >= {
        "weights", "gradients", "optimizer", "activations", "total"
    }  # fmt: skip
    assert set(found["comm_bytes_per_step"]) == {"dp", "tp", "pp", "cp", "ep"}
    direct = estimate.estimate(
        presets.MODELS["llama3-8b"], presets.GPUS["h100-sxm"], seq=4096,
        micro_batch=2, dp=4, tp=2, zero=3, recompute="selective",
    )  # fmt: skip
    for key in REQUIRED - {"memory_bytes", "comm_bytes_per_step"}:
        assert found[key] == pytest.approx(direct[key]), key
    assert found["memory_bytes"] == pytest.approx(direct["memory_bytes"])


def test_shape_flags_and_overrides(capsys) -> None:
    shape = "--layers 32 --hidden 4096 --heads 32 --kv-heads 8 --ffn 14336"
    args = f"{shape} --vocab 128256 --arch llama --seq 8192"
    by_hand = size_json(capsys, *args.split())
    assert by_hand["params"] == size_json(capsys, "--preset", "llama3-8b")["params"]
    half = size_json(capsys, "--preset", "llama3-8b", "--layers", "16")
    assert half["params"] < by_hand["params"]
    tiny = size_json(
        capsys, "--preset", "tiny-gpt", "--no-flash", "--precision", "fp32"
    )
    assert tiny["memory_bytes"]["weights"] == 4 * tiny["params"]


def test_table_and_list_fit_88_columns(capsys) -> None:
    assert main(["size", "--preset", "gpt3-175b", "--tp", "8", "--pp", "8"]) == 0
    out = capsys.readouterr().out
    assert "memory on the most loaded GPU" in out and "MFU" in out
    assert main(["size", "--list"]) == 0
    out += capsys.readouterr().out
    assert "llama3-405b" in out and "h200" in out
    assert max(len(line) for line in out.splitlines()) <= 88


@pytest.mark.parametrize(
    "args,words",
    [
        ("--preset llama3-8b --tp 3", "not divisible by --tp 3"),
        ("--preset llama3-8b --dp 2 --gpus 8", "--gpus is 8"),
        ("--preset nope", "unknown preset 'nope'"),
        ("--preset llama3-8b --gpu v100", "unknown GPU 'v100'"),
        ("--preset llama3-8b --seq -4", "must be at least 1"),
        ("--preset llama3-8b --dp 4 --global-batch 6", "not a multiple"),
        ("--layers 2 --hidden 8", "missing"),
        ("--params 1e9 --preset gpt2-124m --seq 8", "bare count"),
        ("--params 1e9", "give --seq"),
        ("--params 1e9 --seq 8 --tp 2", "no layer shapes"),
        ("--preset mixtral-8x7b --top-k 0", "must be at least 1"),
        ("--preset mixtral-8x7b --top-k 9", "must be 1 to 8 (the experts)"),
        ("--preset mixtral-8x7b --dp 3 --ep 3", "not divisible by --ep 3"),
        ("--preset mixtral-8x7b --dp 2 --ep 4", "folded inside data parallelism"),
        ("--preset llama3-8b --dp 2 --ep 2", "needs a model with experts"),
        ("--preset llama3-8b --top-k 2", "need --experts"),
        ("--preset llama3-8b --experts 8", "needs --top-k"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(capfd, args: str, words: str) -> None:
    assert words in refused(["size", *args.split()], capfd)


def test_the_command_itself() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "snippets", "size", "--preset", "tiny-gpt", "--json"],
        cwd=REPO, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["params"] == 28032


def test_moe_fields(capsys) -> None:
    # Mixtral on 8 GPUs, ep = 8: one expert of each layer a GPU (32 · 3 · 4096 ·
    # 14336); all-to-all a MoE layer: 4 exchanges of k·s rows of h bf16 values, 7/8
    # of them leave the GPU.
    args = "--preset mixtral-8x7b --seq 4096 --dp 8 --ep 8 --zero 1".split()
    found = size_json(capsys, *args)
    assert found["expert_params_per_gpu"] == 32 * 3 * 4096 * 14336
    assert found["all_to_all_bytes_per_moe_layer"] == 4 * 2 * 4096 * 4096 * 2 * 7 / 8
    assert found["comm_bytes_per_step"]["ep"] == 32 * 4 * 2 * 4096 * 4096 * 2 * 7 / 8
    assert found["params_active"] < found["params"]
    dense = size_json(capsys, "--preset", "llama3-8b")
    assert (
        dense["params_active"] == dense["params"]
        and dense["expert_params_per_gpu"] == 0
    )
    assert main(["size", *args]) == 0
    out = capsys.readouterr().out
    assert "active a token" in out and max(map(len, out.splitlines())) <= 88
