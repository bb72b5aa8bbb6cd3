"""The parallelism exercises: known-wrong solutions are rejected, each with the message
that names its mistake (the project's own and the stubs: test_every_exercise)."""

from __future__ import annotations

import pytest
import torch
from grading import graded_fixture, wrong  # noqa: F401

from snippets.exercises.checks.parallel_checks import held_values


@pytest.mark.parametrize(
    "name, mistake, n, says",
    [
        ("ddp_bucket_hook", "no_divide", 3, "hint: each .grad is the sum over the"),
        ("ddp_bucket_hook", "parameter", 2, "the parameter, perhaps, instead of its"),
        ("ddp_bucket_hook", "per_tensor", 2, "in one all-reduce"),
        ("accumulate_loss_scale", "no_scale", 2, "k = 3 times too big"),
        ("accumulate_loss_scale", "k_times_p", 3, "DDP already averages over the"),
        ("accumulate_loss_scale", "always_sync", 2, "runs under model.no_sync()"),
        ("accumulate_loss_scale", "never_sync", 2, "this rank's own: the last"),
        ("zero1_step", "unsharded", 3, "keeps only this rank's shard of the mom"),
        ("zero1_step", "no_gather", 3, "all-gather the shards"),
        ("zero1_step", "averaged_twice", 2, "the gradient was averaged twice"),
        ("column_parallel", "f_in_forward", 3, "its all-reduce is in backward"),
        ("column_parallel", "no_f", 2, "hint: x.grad is only this rank's part"),
        ("column_parallel", "wrong_dim", 2, "weight as (out, in): cut it on the"),
        ("row_parallel", "no_g", 3, "g all-reduces it (Σ over ranks) in forward"),
        ("row_parallel", "bias_per_rank", 2, "the bias is added t times"),
        ("row_parallel", "wrong_dim", 2, "weight as (out, in): cut it on the"),
        ("vocab_parallel_cross_entropy", "local_max", 3, "its own maximum"),
        ("vocab_parallel_cross_entropy", "unmasked", 2, "mask it where the target"),
        ("vocab_parallel_cross_entropy", "gathered", 2, "logits are never gathered"),
    ],
)
def test_known_wrong_solutions_are_rejected(graded, name, mistake, n, says) -> None:
    code, out = graded(name, wrong(f"{name}_{mistake}"), "-n", str(n))
    assert code == 1, out
    assert says in out, out


def test_state_is_measured_by_its_own_storages_not_the_parameters() -> None:
    params = [torch.zeros(10, requires_grad=True), torch.zeros(3, requires_grad=True)]
    chunk = params[0].data[5:]  # a chunk that is a view costs nothing of its own
    momentum = torch.ones(5)
    state = {
        "chunks": [chunk],
        "momentum": {0: momentum, "again": momentum[1:]},  # one storage, once
        "step": torch.tensor(1.0),  # 0-d: a counter, left out
        "also": (torch.ones(2), params[1], 3),
    }
    assert held_values(state, params) == 5 + 2
