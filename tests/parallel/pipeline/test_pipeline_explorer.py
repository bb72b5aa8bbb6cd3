"""The explorer's runs: which settings run, the bubble spans tile each lane's idle
time up to the makespan, and one real run on 2 ranks is drawn as its plan (the
schedule's own action lists, the oracle) with the loss of one process."""

from __future__ import annotations

import pytest
import torch.distributed as dist

from snippets.core.runtime import launch
from snippets.parallel.pipeline import pipeline_explorer as ex
from snippets.parallel.pipeline.pipeline_schedules import Action, schedule
from snippets.parallel.pipeline.pipeline_timeline import spans_and_trace


def test_settings_run_interleaved_only_where_m_is_a_multiple_of_p() -> None:
    runs = ex.settings(world=3)
    inter = {(p, m) for name, p, m, v in runs if name == "interleaved"}
    assert inter == {(2, 2), (2, 4), (2, 6), (3, 6)}
    assert all(v == (2 if n == "interleaved" else 1) for n, _, _, v in runs)
    assert len(runs) == 3 * 2 * 3 + 4 and {p for _, p, _, _ in ex.settings(2)} == {2}


def test_bubbles_fill_every_gap_up_to_the_makespan() -> None:
    spans = [{"lane": "a", "kind": "F", "start": 1.0, "end": 2.0},
             {"lane": "a", "kind": "B", "start": 3.0, "end": 4.0},
             {"lane": "b", "kind": "F", "start": 0.0, "end": 5.0}]  # fmt: skip
    idle = [(s["lane"], s["start"], s["end"]) for s in ex.with_bubble(spans)
            if s["kind"] == "bubble"]  # fmt: skip
    assert idle == [("a", 0.0, 1.0), ("a", 2.0, 3.0), ("a", 4.0, 5.0)]


def one_run(name: str, m: int, v: int):
    return ex.run_one(name, dist.get_world_size(), m, v, None)


@pytest.mark.parametrize("name, m, v", [("zb-h1", 3, 1)])
def test_a_real_run_is_drawn_as_its_plan(name, m, v) -> None:
    per_rank = launch(one_run, 2, "gloo", 60, args=(name, m, v))[0]
    plan = schedule(name, 2, m, v)
    for rank, stamps in enumerate(per_rank):
        got = [Action(s["kind"], s["microbatch"], s["chunk"]) for s in stamps]
        assert got == plan[rank]
    drawn = ex.with_bubble(spans_and_trace(per_rank)[0])
    makespan = max(s["end"] for s in drawn)
    for lane in ("rank 0", "rank 1"):  # work and bubble cover the lane exactly once
        total = sum(s["end"] - s["start"] for s in drawn if s["lane"] == lane)
        assert total == pytest.approx(makespan)
    assert {s["kind"] for s in drawn} == {"F", "B", "W", "bubble"}


def test_the_gap_sentence_counts_the_runs_above_their_formula() -> None:
    runs = [
        {"bubble": b, "formula": f} for b, f in [(0.5, 0.2), (0.1, 0.2), (0.3, 0.3)]
    ]
    line = ex.gap_sentence(runs)
    assert line.startswith("1 of 3 executed bubbles came out above")
    assert "from -0.10 to +0.30" in line and "(median 0.00)" in line
    # a gap that rounds to zero reads 0.00, whatever its sign
    tiny = [{"bubble": 0.296, "formula": 0.3}, {"bubble": 0.5, "formula": 0.2}]
    assert "from 0.00 to +0.30" in ex.gap_sentence(tiny)
