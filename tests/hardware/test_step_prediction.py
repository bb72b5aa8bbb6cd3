"""The this-machine profile and the step prediction: a rank's share of the machine
against a count of threads on cores; the snippet's prediction against
``python -m snippets size --gpu this-machine``; the α-β time against the ring
written out; the scheduler's accounting against the thread's CPU clock and the wall;
the miss's parts against numbers made up by hand; a kernel without schedstat (macOS)
runs it all the same and is named; bad input in one line."""

from __future__ import annotations

import dataclasses
import json
import os
import time

import pytest
from conftest import refused

from snippets.__main__ import main as cli
from snippets.core import results
from snippets.core.runtime import UsageError, launch, run
from snippets.hardware import step_prediction as S
from snippets.models.tiny_gpt import GPTConfig
from snippets.sizing import presets

ROOF = {"peak_matmul_flops": 1e10, "bandwidth_bytes_per_s": 4e9}
COST = {"alpha_s": 1e-3, "beta_s_per_byte": 1e-8, "gamma_s_per_byte": 0.0}
SMALL = GPTConfig(vocab_size=32, block_size=8, n_layer=2, n_head=2, n_embd=16,
                  bias=False)  # fmt: skip


def fake_results(folder) -> None:
    folder.mkdir(exist_ok=True)
    for name, value in (("roofline", ROOF), ("cost_model", COST)):
        (folder / f"{name}.json").write_text(json.dumps({"result": value}))


def threads_on_cores(ranks: int, cores: int) -> float:
    """A rank's share by counting: every thread of every rank gets min(1, c/T) of a
    core when T threads run on c cores; a rank has its threads' part of c."""
    threads = max(1, cores // ranks)
    each = min(1.0, cores / (ranks * threads))
    return threads * each / cores


@pytest.mark.parametrize(
    "ranks,cores", [(1, 2), (2, 2), (4, 2), (3, 2), (3, 4), (2, 3), (5, 16)]
)
def test_a_ranks_share_is_its_threads_time_on_the_cores(ranks, cores) -> None:
    gpu = presets.this_machine(ROOF, COST, ranks, cores, 8e9)
    share = threads_on_cores(ranks, cores)
    assert gpu["peak_flops"] == pytest.approx(1e10 * share)
    assert gpu["hbm_bw"] == pytest.approx(4e9 * share)
    assert gpu["hbm_bytes"] == pytest.approx(8e9 / ranks)
    assert gpu["alpha_intra"] == gpu["alpha_inter"] == 1e-3
    assert gpu["nvlink_bw"] == gpu["pcie_bw"] == gpu["ib_bw"] == pytest.approx(1e8)


def test_the_cli_profile_reads_the_results(tmp_path, monkeypatch, capsys) -> None:
    fake_results(tmp_path)
    monkeypatch.setenv(results.RESULTS_ENV, str(tmp_path))
    machine = S.load_machine()
    for layout in S.LAYOUTS:
        args = (f"--layers 4 --hidden 128 --heads 4 --vocab 256 --seq 64 --dp "
                f"{layout.dp} --tp {layout.tp} --pp {layout.pp} --global-batch 8 "
                f"--micro-batch {8 // (layout.dp * layout.m)} --precision fp32 "
                "--efficiency 1 --gpu this-machine --json")  # fmt: skip
        assert cli(["size", *args.split()]) == 0
        found = json.loads(capsys.readouterr().out)
        # the CLI's shape flags make a GPT-2, biases in
        ours = S.predict(layout, 8, machine, dataclasses.replace(S.CFG, bias=True))
        assert found["step_time_s"] == pytest.approx(ours["step_time_s"], rel=1e-12)


def test_the_prediction_is_the_calculators_on_a_made_up_machine(
    tmp_path, monkeypatch
) -> None:
    fake_results(tmp_path)
    monkeypatch.setenv(results.RESULTS_ENV, str(tmp_path))
    machine = S.load_machine() | {"cores": 2}
    plans = {x.name: S.predict(x, 8, machine) for x in S.LAYOUTS}
    # the same FLOPs on the same cores, however many ranks share them
    computes = {p["compute_seconds_per_step"] for p in plans.values()}
    assert max(computes) == pytest.approx(min(computes), rel=1e-12)
    # DP 2: one ring all-reduce of the fp32 gradients, 2(p-1) messages of P/p
    P, n = S.CFG.num_params(), 2
    ring = 2 * (n - 1) * 1e-3 + 2 * (n - 1) / n * 4 * P * 1e-8
    assert plans["DP 2"]["comm_seconds_per_step"]["dp"] == pytest.approx(ring)
    # PP 2: 1F1B over m = 4 micro-batches idles p - 1 = 1 slot of 4
    assert plans["PP 2"]["bubble_factor"] == pytest.approx(1.25)
    assert plans["DP 1"]["step_time_s"] == plans["DP 1"]["compute_seconds_per_step"]


def test_the_schedulers_accounting_against_the_clocks() -> None:
    start = time.time()
    (ran, waited), cpu = S.scheduler_seconds(), time.thread_time()
    total = 0
    while time.thread_time() - cpu < 0.05:  # 50 ms on a core, however long it takes
        total += 1
    (ran2, waited2), used = S.scheduler_seconds(), time.thread_time() - cpu
    wall = time.time() - start
    assert ran2 - ran == pytest.approx(used, rel=0.2)
    # ran or waited, or slept; the kernel brings a running thread's count up to date
    # at its ticks (4 ms apart at 250 Hz), so a read can lag by one
    tick = 0.01
    assert (ran2 - ran) + (waited2 - waited) <= wall + tick


def test_the_miss_is_taken_apart_by_hand() -> None:
    # 4 one-thread ranks on 2 cores: each runs half the time by design, so a call
    # that ran 0.3 s waits 0.3 s for its own ranks; 0.5 s waited leaves 0.2 s of load
    run_ = {"threads": 1, "ranks": [[(1.0, 0.3, 0.5, 0.0)], [(0.9, 0.3, 0.6, 0.1)]]}
    got = S.explain(S.Layout("DP 4", dp=4), run_, cores=2)
    assert got["own_wait"] == 0.5
    assert got["waited"] == [0.5] and got["load_free_s"] == [pytest.approx(0.8)]
    # 2 ranks on 2 cores: every wait is someone else's
    got = S.explain(S.Layout("DP 2", dp=2), run_, cores=2)
    assert got["own_wait"] == 0.0 and got["load_free_s"] == [pytest.approx(0.5)]


@pytest.mark.parametrize("layout", [S.Layout("DP 2", dp=2), S.Layout("PP 2", pp=2)])
def test_two_ranks_measure_their_steps(layout) -> None:
    found = launch(S.measure_rank, 2, "gloo", 60.0, args=(layout, SMALL, 4, 2))[0]
    assert len(found["wall"]) == len(found["cpu"]) == 2  # one a round
    assert len(found["ranks"]) == 2 and found["threads"] >= 1
    for calls in found["ranks"]:
        assert len(calls) == 2  # the warm-up call dropped
        for wall, ran, waited, _ in calls:
            assert ran + waited <= wall + 0.01  # runs, waits or sleeps, a tick late
    slowest = [max(c[0] for c in r) for r in zip(*found["ranks"])]
    for mine, harness in zip(slowest, found["wall"]):
        assert mine <= harness + 1e-3  # the harness's clock is around ours


def test_a_run_on_a_made_up_machine(tmp_path, monkeypatch) -> None:
    fake_results(tmp_path)
    monkeypatch.setenv(results.RESULTS_ENV, str(tmp_path))
    monkeypatch.setattr(S, "CFG", SMALL)
    monkeypatch.setattr(S, "LAYOUTS", (S.Layout("DP 1"), S.Layout("TP 2", tp=2)))
    out = run(S.main, S.SPEC, options={"rounds": 2, "batch": 4})
    steps = {r["layout"]: r for r in out["steps"]}
    assert set(steps) == {"DP 1", "TP 2"}
    for r in steps.values():
        ratio = r["measured_s"]["median"] / r["predicted_s"]
        assert r["ratio"]["lo"] <= ratio * (1 + 1e-9)  # the per-round ratios' IQR
        assert ratio <= r["ratio"]["hi"] * (1 + 1e-9)
    assert "of 2 layouts" in out["markdown"]["findings"]
    if os.path.exists("/proc/thread-self/schedstat"):  # Linux: every wait counted
        assert (
            out["waits_measured"] and S.NOT_COUNTED not in out["markdown"]["findings"]
        )
        assert all(r["waited"] is not None for r in out["steps"])


def test_without_schedstat_the_steps_are_timed_and_the_waits_named(
    tmp_path, monkeypatch
) -> None:
    """The reader taken away, as on macOS: /proc is a folder that does not exist."""
    fake_results(tmp_path)
    monkeypatch.setenv(results.RESULTS_ENV, str(tmp_path))
    monkeypatch.setattr(S, "PROC", str(tmp_path / "no-proc"))
    with pytest.raises(FileNotFoundError):
        S.scheduler_seconds()
    monkeypatch.setattr(S, "CFG", SMALL)
    monkeypatch.setattr(S, "LAYOUTS", (S.Layout("DP 1"), S.Layout("DP 2", dp=2)))
    out = run(S.main, S.SPEC, options={"rounds": 2, "batch": 4})
    assert out["waits_measured"] is False
    said = out["markdown"]["findings"]
    assert said.count(S.NOT_COUNTED) == 1 and "main thread waited" not in said
    for r, row in zip(out["steps"], out["tables"]["steps"]):
        assert len(r["measured_s"]) == 3 and r["measured_s"]["median"] > 0
        assert r["waited"] is r["load_free_s"] is r["load_free_ratio"] is None
        assert row["waited for a core"] == row["load-free ms"] == "—"


def test_a_missed_layout_without_schedstat_is_its_times_alone() -> None:
    machine = {"roofline": ROOF, "cost_model": COST, "cores": 2,
               "counts_waits": False}  # fmt: skip
    row = {"layout": "DP 2", "ranks": 2, "threads": 1, "predicted_s": 0.01,
           "compute_s": 0.008, "comm_s": 0.002, "bubble": 1.0,
           "measured_s": S.Spread(0.03, 0.029, 0.031),
           "ratio": S.Spread(3.0, 2.9, 3.1), "waited": None, "own_wait": None,
           "load_free_s": None, "others_waited_s": None, "ran_s": None,
           "load_free_ratio": None, "load": (0.5, 0.7)}  # fmt: skip
    said = S.findings([row], machine)
    assert said[2].startswith("DP 2 missed: predicted 10.00 ms (compute 8.00, ")
    assert said[2].endswith(f"ms, {row['ratio'].text(1)}×.")  # the times, no waits
    assert said[3] == S.NOT_COUNTED and said[4].startswith("Load: ")


def test_missing_results_are_one_line(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv(results.RESULTS_ENV, str(tmp_path))
    with pytest.raises(UsageError, match="run 'python -m snippets run roofline'"):
        S.load_machine()


@pytest.mark.parametrize(
    "args,words",
    [(["run", "step_prediction", "--rounds", "0"], "--rounds: must be at least 1"),
     (["run", "step_prediction", "--batch", "6"], "--batch 6 must split"),
     (["size", "--preset", "tiny-gpt", "--gpu", "this-mashine"],
      "choose one of a100-40gb, a100-80gb, h100-sxm, h200, b200, this-machine"),
     (["size", "--preset", "tiny-gpt", "--gpu", "this-machine"],
      "needs /nowhere/roofline.json")],
)  # fmt: skip
def test_bad_input_is_one_line_and_exit_2(args, words, capfd) -> None:
    assert words in refused(args, capfd, env={results.RESULTS_ENV: "/nowhere"})
