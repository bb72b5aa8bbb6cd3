"""The sizing exercises: known-wrong parameter counts and ZeRO bytes fail, each with
the message that names its mistake (the project's own and the stubs:
test_every_exercise)."""

from __future__ import annotations

import pytest
from grading import graded_fixture, wrong  # noqa: F401


@pytest.mark.parametrize(
    "name, mistake, says",
    [
        ("gpt_params", "tied_twice", "hint: the tied head is counted"),
        ("gpt_params", "no_norms", "hint: the LayerNorms are left out"),
        ("gpt_params", "no_biases", "hint: the biases are left out"),
        (
            "zero_memory",
            "grads_at_stage_1",
            "hint: gradients are sharded only from stage 2",
        ),
        ("zero_memory", "params_at_stage_2", "hint: parameters are sharded only from"),
    ],
)
def test_known_wrong_solutions_are_rejected(graded, name, mistake, says) -> None:
    code, out = graded(name, wrong(f"{name}_{mistake}"))
    assert code == 1, out
    assert says in out, out


def test_the_paper_table_alone_catches_a_missing_master_copy(graded, tmp_path) -> None:
    """A formula that takes K but drops 4 of its bytes (the fp32 master weights) is
    held to the paper's 120 GB for 7.5B parameters."""
    file = tmp_path / "zero_memory.py"
    file.write_text(
        "def model_state_bytes(stage, psi, N, p, g, K):\n"
        "    parts = {'parameters': p * psi / (N if stage >= 3 else 1),\n"
        "             'gradients': g * psi / (N if stage >= 2 else 1),\n"
        "             'optimizer': (K - 4) * psi / (N if stage >= 1 else 1)}\n"
        "    return parts | {'total': sum(parts.values())}\n"
    )
    code, out = graded("zero_memory", file)
    assert code == 1, out
    assert "FAIL  stage 0, Ψ=1e+06, N=4, (p, g, K)=(2, 2, 12): optimizer bytes" in out
    assert "FAIL  the paper's stage 0: 120 GB on each of 64: GB in total" in out
