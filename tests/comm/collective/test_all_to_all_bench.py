"""The all-to-all benchmark: both of its functions move what gloo's moves (the
unchecked form too, at uneven splits), the unchecked form still refuses what one rank
can see is wrong, a run prints one record a size through the timing harness, and
bad options are one line and exit 2."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch
import torch.distributed as dist
from conftest import REPO, refused

from snippets.comm.collective.all_to_all import all_to_all_single, random_splits
from snippets.core.runtime import launch


def unchecked_rank() -> bool:
    p, me = dist.get_world_size(), dist.get_rank()
    g = torch.Generator().manual_seed(4)
    sends = [random_splits(6, p, g) for _ in range(p)]
    recvs = [sends[i][me] for i in range(p)]
    x = torch.arange(6 * 2, dtype=torch.float64).reshape(6, 2) + 100 * me
    ours = torch.empty(sum(recvs), 2, dtype=torch.float64)
    theirs = torch.empty_like(ours)
    all_to_all_single(ours, x, recvs, sends[me], check=False)
    dist.all_to_all_single(theirs, x, recvs, sends[me])
    try:  # sizes that cannot be right on this rank alone: refused, not sent
        all_to_all_single(ours, x, recvs, [7] * p, check=False)
    except ValueError:
        return torch.equal(ours, theirs)
    return False


def test_the_unchecked_form_moves_what_gloo_moves_and_refuses_bad_sizes() -> None:
    assert launch(unchecked_rank, 3, "gloo", 60) == [True] * 3


def bench(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "snippets", "bench", "all_to_all", *args],
        cwd=REPO, capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def test_a_run_gives_one_record_a_size() -> None:
    out = bench("--mib", "1", "--mib", "2", "--rounds", "3", "--json")
    assert out.returncode == 0, out.stderr
    records = [json.loads(line) for line in out.stdout.splitlines()]
    assert [r["mib"] for r in records] == [1, 2]
    for r in records:
        assert r["rounds"] == 3 and len(r["times_s"]) == 3
        assert r["world_size"] == 2 and r["bytes"] == r["mib"] << 20
        assert r["speedup_lo"] <= r["speedup"] <= r["speedup_hi"]


@pytest.mark.parametrize(
    "args,words",
    [(["--mib", "0"], "--mib: must be at least 1"),
     (["--rounds", "-2"], "--rounds: must be at least 1")],
)  # fmt: skip
def test_bad_options_are_one_line_and_exit_2(args, words, capfd) -> None:
    assert words in refused(["bench", "all_to_all", *args], capfd)
