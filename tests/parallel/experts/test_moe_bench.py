"""The MoE benchmark: one record from a run on real ranks, the baseline scaled by the
rank count, and bad options are one line and exit 2."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import REPO, refused


def bench(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "snippets", "bench", "moe", *args],
        cwd=REPO, capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def test_a_run_gives_one_record_with_its_spread() -> None:
    out = bench("--tokens", "64", "--rounds", "3", "--json")
    assert out.returncode == 0, out.stderr
    r = json.loads(out.stdout)
    assert r["world_size"] == 2 and r["tokens"] == 64 and r["rounds"] == 3
    assert r["ratio_lo"] <= r["ratio"] <= r["ratio_hi"]
    assert r["ep_lo_s"] <= r["ep_s"] <= r["ep_hi_s"]
    scaled = r["one_scaled_s"], r["one_scaled_lo_s"], r["one_scaled_hi_s"]
    assert scaled[1] <= scaled[0] <= scaled[2]


@pytest.mark.parametrize("args", [["--tokens", "0"], ["--rounds", "-1"], ["-n", "0"]])
def test_bad_options_are_one_line_and_exit_2(args, capfd) -> None:
    refused(["bench", "moe", *args], capfd)


@pytest.mark.parametrize("door", [["bench", "moe"], ["run", "moe_bench"]])
def test_ranks_that_do_not_split_the_experts_are_refused_before_any_start(
    door, capfd
) -> None:
    said = refused([*door, "-n", "3"], capfd, nothing_on_stdout=True)
    assert "4 experts do not split over 3 ranks" in said
