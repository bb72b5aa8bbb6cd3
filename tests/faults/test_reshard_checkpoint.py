"""The resharding checkpoint against oracles of its own: a brute-force cut of a flat
range into boxes, one process trained by hand with plain Adam, byte counts from the
model's shapes, the boxes of one weight worked out by hand, and bad input refused in
one line."""

from __future__ import annotations

import os
import warnings

import pytest
import torch
import torch.distributed.checkpoint as dcp
from conftest import process_children, refused

from snippets.faults import reshard_checkpoint as rc
from snippets.models.tiny_gpt import GPT, random_batch


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    folder = tmp_path_factory.mktemp("dcp") / "checkpoint"
    result = rc.main(save=str(folder))
    assert process_children(os.getpid()) == []
    return folder, result


@pytest.mark.parametrize("shape", [(7,), (5, 6), (3, 4, 5), (30, 30), (1, 9)])
def test_boxes_read_back_the_flat_range_in_order(shape) -> None:
    n = torch.Size(shape).numel()
    values = torch.arange(n).view(shape)
    for N in range(1, 6):
        for r in range(N):
            a, b = rc.zero_range(n, N, r)
            found = rc.boxes(shape, a, b)
            read = [
                values[tuple(slice(o, o + s) for o, s in zip(off, size))]
                for off, size in found
            ]
            flat = torch.cat([t.reshape(-1) for t in read]) if read else values[:0]
            assert torch.equal(flat.reshape(-1), torch.arange(a, b)), (shape, N, r)


def test_the_loaded_state_is_one_process_trained_by_hand(saved) -> None:
    folder, _ = saved
    model = GPT(rc.CFG).double()
    adam = torch.optim.Adam(model.parameters(), lr=rc.LR)
    for idx, targets in random_batch(rc.CFG, 8, steps=rc.STEPS):
        adam.zero_grad()
        model(idx, targets)[1].backward()
        adam.step()
    loaded = rc.load_one(str(folder))["state"]
    for name, p in model.named_parameters():
        torch.testing.assert_close(
            loaded[f"model.{name}"], p.detach(), rtol=0, atol=1e-12
        )
        for key in rc.STATE:
            torch.testing.assert_close(
                loaded[f"optim.{name}.{key}"], adam.state[p][key], rtol=0, atol=1e-12
            )
        assert loaded[f"optim.{name}.step"].item() == rc.STEPS


def test_every_layout_compared_every_tensor(saved) -> None:
    _, result = saved
    params = len(list(GPT(rc.CFG).parameters()))  # the tied head counts once
    rows = result["tables"]["layouts"]
    assert [r["layout"] for r in rows] == list(rc.LAYOUTS)
    assert all(r["tensors equal (torch.equal)"] == 4 * params for r in rows)
    assert [r["ranks"] for r in rows] == [1, 4, 2, 3]


def test_the_files_hold_every_value_once_and_each_rank_wrote_its_own(saved) -> None:
    folder, result = saved
    disk = result["tables"]["disk"]
    values = sum(p.numel() for p in GPT(rc.CFG).parameters())
    steps = len(list(GPT(rc.CFG).parameters()))  # one float32 step count each
    assert sum(r.get("raw bytes", 0) for r in disk) == 3 * 8 * values + 4 * steps
    assert sorted(os.listdir(folder)) == sorted(
        [r["file"] for r in disk] + [rc.REFERENCE]
    )
    for r in disk:
        assert r["bytes"] == os.path.getsize(folder / r["file"])
        if r["file"] != ".metadata":
            assert r["written by"] == f"rank {r['file'][2]}"


def test_a_quarter_of_a_30_by_30_weight_is_two_boxes_per_rank(saved) -> None:
    _, result = saved
    # 900 values / 4 = 225 = 7 rows of 30 and 15 more
    by_hand = [
        ((0, 0), (7, 30)),
        ((7, 0), (1, 15)),
        ((7, 15), (1, 15)),
        ((8, 0), (7, 30)),
        ((15, 0), (7, 30)),
        ((22, 0), (1, 15)),
        ((22, 15), (1, 15)),
        ((23, 0), (7, 30)),
    ]
    rows = result["tables"]["chunks"]
    found = sorted((r["offsets (row, col)"], r["sizes (rows, cols)"]) for r in rows)
    assert found == by_hand


def test_one_value_one_ulp_off_fails_the_comparison() -> None:
    state = {"model.x": torch.ones(3, dtype=torch.float64)}
    off = {
        "model.x": torch.tensor(
            [
                1.0,
                1.0,
                torch.nextafter(
                    torch.tensor(1.0, dtype=torch.float64),
                    torch.tensor(2.0, dtype=torch.float64),
                ),
            ]
        )
    }
    with pytest.raises(AssertionError):
        rc.compare([{"state": off, "read": []}], state, "one")


def test_bad_input_is_one_line_and_exit_2(tmp_path, capfd) -> None:
    def refuse(*args: str) -> str:
        return refused(["run", "reshard_checkpoint", *args], capfd)

    assert "no checkpoint folder" in refuse("--load", str(tmp_path / "nowhere"))
    other = tmp_path / "other"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        dcp.save(
            {"model.tok_emb.weight": torch.zeros(64, 32)},
            checkpoint_id=other,
            no_dist=True,
        )
    assert "from another model" in refuse("--load", str(other))
    assert "tp=4 does not divide" in refuse("--layout", "tp4")
    assert "pp=3 stages" in refuse("--layout", "pp3")
    assert "unknown layout" in refuse("--layout", "tp2dp2")
