"""Crash and resume against an uninterrupted run, bit for bit; each restored piece
shown to matter; Young–Daly against a brute-force minimum; bad input in one line;
and nothing left running."""

from __future__ import annotations

import os

import pytest
import torch
from conftest import process_children, refused

from snippets.faults import crash_resume as cr

STEPS, EVERY, KILL = 6, 2, (3, 1)  # checkpoints at 2, 4, 6; rank 1 dies at step 3


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    base = tmp_path_factory.mktemp("resume")
    crashed = base / "crashed"
    crashed.mkdir()
    cr.torchrun(str(crashed), STEPS, EVERY, KILL)
    clean = cr.run_clean(str(base / "clean"), STEPS, 5)  # another interval: 5
    return crashed, clean, base


def test_the_resumed_job_ends_bit_identical_to_an_uninterrupted_run(runs) -> None:
    crashed, clean, _ = runs
    final = torch.load(crashed / "final.pt")
    assert final["weights"].keys() == clean["weights"].keys()
    for name, w in clean["weights"].items():
        assert torch.equal(final["weights"][name], w), name
    for name, state in clean["adam"].items():
        for key, t in state.items():
            assert torch.equal(final["adam"][name][key], t), (name, key)


def test_the_kill_was_real_and_the_restart_resumed_from_the_last_checkpoint(runs):
    crashed, _, _ = runs
    seen = cr.events(str(crashed))
    kills = [e for e in seen if e["event"] == "kill"]
    assert [(e["rank"], e["attempt"], e["step"]) for e in kills] == [(1, 0, 3)]
    starts = sorted(
        (e["attempt"], e["rank"], e["step"]) for e in seen if e["event"] == "start"
    )
    assert starts == [(0, 0, 0), (0, 1, 0), (1, 0, 2), (1, 1, 2)]
    log = (crashed / "torchrun.log").read_text()
    assert "failed (exitcode: -9) local_rank: 1" in log  # -9: SIGKILL
    lost = cr.lost_time(str(crashed), KILL)
    assert lost["steps redone"] == 1 and lost["resumed from step"] == 2


def test_nothing_is_left_running(runs) -> None:
    assert process_children(os.getpid()) == []


@pytest.mark.parametrize("piece", ["rng", "data", "optimizer"])
def test_leaving_one_piece_out_of_the_restore_changes_the_result(runs, piece):
    crashed, clean, base = runs
    kept = tuple(p for p in cr.PIECES if p != piece)
    got = cr.run_clean(
        str(base / f"without-{piece}"),
        STEPS,
        5,
        start_from=str(crashed / "step0002"),
        pieces=kept,
    )
    assert not cr.same(got, clean)


def test_all_pieces_restored_from_the_same_checkpoint_match(runs) -> None:
    crashed, clean, base = runs
    got = cr.run_clean(
        str(base / "all"), STEPS, 5, start_from=str(crashed / "step0004")
    )
    assert cr.same(got, clean)


def test_a_checkpoint_without_metadata_is_passed_over(tmp_path) -> None:
    for step, complete in ((2, True), (4, True), (6, False)):
        (tmp_path / f"step{step:04d}").mkdir()
        if complete:
            (tmp_path / f"step{step:04d}" / ".metadata").write_bytes(b"")
    assert cr.newest(tmp_path).name == "step0004"
    assert cr.newest(tmp_path / "step0006") is None


@pytest.mark.parametrize("rank", [0, 1])
def test_a_reloaded_sampler_continues_the_same_order(rank) -> None:
    whole, first = cr.Sampler(20, seed=3), cr.Sampler(20, seed=3)
    expected = [whole.next(rank, 2) for _ in range(7)]  # 2 steps an epoch, 3.5 epochs
    taken = [first.next(rank, 2) for _ in range(3)]  # stops inside the second epoch
    later = cr.Sampler(20, seed=99)
    later.load(first.state())
    taken += [later.next(rank, 2) for _ in range(4)]
    assert all(torch.equal(a, b) for a, b in zip(taken, expected, strict=True))
    fresh = cr.Sampler(20, seed=3)  # without the load: not the same order
    assert not all(torch.equal(a, fresh.next(rank, 2)) for a in expected[3:])


@pytest.mark.parametrize("delta,mtbf", [(0.02, 3600.0), (5.0, 86400.0), (1.0, 60.0)])
def test_young_daly_is_the_minimum_of_the_waste(delta, mtbf) -> None:
    grid = [delta * 1.001**i for i in range(1, 30000)]
    best = min(grid, key=lambda t: cr.waste(t, delta, mtbf, restart=3.0))
    assert best == pytest.approx(cr.young_daly(delta, mtbf), rel=2e-3)


def test_bad_input_is_one_line_and_exit_2(capfd) -> None:
    run = ["run", "crash_resume"]
    assert "past the end" in refused([*run, "--steps", "5", "--kill-step", "5"], capfd)
    assert "--kill-rank 2" in refused([*run, "--kill-rank", "2"], capfd)
    assert "must be at least 1" in refused([*run, "--every", "0"], capfd)
