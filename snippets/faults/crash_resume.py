"""Crash and resume: a rank killed mid-training under ``torchrun --max-restarts 1``,
the job restarted from its last checkpoint, and the final weights bit for bit those
of a run that was never interrupted.

Two ranks train the tiny GPT (dropout on, so the random state matters) with the
project's DDP and Adam, on batches drawn from a fixed pool in an order a generator
shuffles each epoch. Every ``k`` steps they save, with ``torch.distributed.checkpoint``:
the weights, Adam's state, each rank's own random state, the sampler (its generator,
its epoch's order, its place in it) and the next step. At a chosen step one rank sends
itself SIGKILL, in the first attempt only (``TORCHELASTIC_RESTART_COUNT`` = 0).
torchrun sees the worker die, stops the other, starts both again, and they resume from
the newest *complete* checkpoint: DCP writes ``.metadata`` after every rank's data, so
a folder without it was cut short and is passed over.

The oracle is an uninterrupted run of the same training (launched by the project's
runtime, not torchrun): the final weights and Adam state must be ``torch.equal``.
Leaving any one piece out of the restore (the random state, the sampler, the
optimizer) must break that, and the run checks that it does.

Time lost to a failure is the restart (find the dead worker, stop the rest, start and
rendezvous again, load) plus the steps redone since the checkpoint. Young and Daly's
first-order optimum for the interval between checkpoints that cost δ each, with a mean
time between failures M, is τ_opt = √(2δM): the waste δ/τ (saving) + τ/(2M) (work
redone, half an interval on average) is least there.

    python -m snippets run crash_resume                  # k = 2 and 5, kill at step 9
    python -m snippets run crash_resume --every 3 --kill-step 4 --kill-rank 0
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import tempfile
import time
import warnings
from pathlib import Path

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.state_dict import (
    get_state_dict,
    set_model_state_dict,
    set_optimizer_state_dict,
)
from torch.utils._pytree import tree_map

from snippets.core.charts import line_chart
from snippets.core.claims import Observation, Spread, check, law
from snippets.core.cli import main_entry, nonnegative_int, positive_int
from snippets.core.runtime import Spec, UsageError, launch
from snippets.core.sessions import run_sessions, torchrun_command
from snippets.models.tiny_gpt import GPT, GPTConfig, random_batch
from snippets.parallel.data.ddp import DDP

SPEC = Spec(
    summary="a rank killed under torchrun, resumed, bit for bit the same", timed=True
)

CFG = GPTConfig(dropout=0.1)  # dropout draws random numbers: their state must return
WORLD, ROWS, POOL, LR, SEED = 2, 4, 24, 1e-2, 0  # ROWS per rank; POOL sequences
STEPS, KILL_STEP, KILL_RANK, INTERVALS = 12, 9, 1, (2, 5)
PIECES = ("model", "optimizer", "rng", "data")  # what a checkpoint brings back
TORCHRUN_TIMEOUT_S, GROUP_TIMEOUT_S = 240.0, 60.0


# --8<-- [start:sampler]
class Sampler:
    """The pool in an order a generator shuffles each epoch; step by step, each rank
    takes its ROWS of the next WORLD·ROWS. Its state is the generator's, the
    epoch's order and the place in it."""

    def __init__(self, pool: int, seed: int):
        self.generator = torch.Generator().manual_seed(seed)
        self.order = torch.randperm(pool, generator=self.generator)
        self.pos = 0

    def next(self, rank: int, world: int) -> torch.Tensor:
        if self.pos + world * ROWS > len(self.order):  # a new epoch, a new order
            self.order = torch.randperm(len(self.order), generator=self.generator)
            self.pos = 0
        rows = self.order[self.pos + rank * ROWS : self.pos + (rank + 1) * ROWS]
        self.pos += world * ROWS
        return rows

    def state(self) -> dict:
        return {
            "generator": self.generator.get_state(),
            "order": self.order.clone(),
            "pos": torch.tensor(self.pos),
        }

    def load(self, state: dict) -> None:
        self.generator.set_state(state["generator"])
        self.order, self.pos = state["order"], int(state["pos"])


# --8<-- [end:sampler]


# --8<-- [start:checkpoint]
def training_state(model, optimizer, sampler, step: int) -> dict:
    """What a checkpoint holds. Weights, Adam and the sampler are the same on every
    rank (DCP writes them once); each rank's random state is its own key."""
    weights, adam = get_state_dict(model, optimizer)
    return {
        "model": weights,
        "optimizer": adam,
        "rng": {f"rank{dist.get_rank()}": torch.get_rng_state()},
        "data": sampler.state(),
        "step": torch.tensor(step),
    }


def save(folder: Path, model, optimizer, sampler, step: int) -> float:
    """Save the state before ``step`` to ``folder/step<step>``; seconds it took."""
    start = time.perf_counter()
    with warnings.catch_warnings():  # DCP's note that it writes to a file system
        warnings.simplefilter("ignore")
        dcp.save(
            training_state(model, optimizer, sampler, step),
            checkpoint_id=folder / f"step{step:04d}",
        )
    return time.perf_counter() - start


def newest(folder: Path) -> Path | None:
    """The newest complete checkpoint: ``.metadata`` is written last, after every
    rank's data, so a folder without it was cut short."""
    done = sorted(p.parent for p in folder.glob("step*/.metadata"))
    return done[-1] if done else None


def resume(path: Path, model, optimizer, sampler, pieces=PIECES) -> int:
    """Load ``pieces`` of the checkpoint at ``path``; the step to go on from."""
    live = training_state(model, optimizer, sampler, 0)  # the shapes to load into
    state = tree_map(lambda t: t.clone() if torch.is_tensor(t) else t, live)
    with warnings.catch_warnings():  # copies: a piece left out stays as it is
        warnings.simplefilter("ignore")
        dcp.load(state, checkpoint_id=path)
    if "model" in pieces:
        set_model_state_dict(model, state["model"])
    if "optimizer" in pieces:
        set_optimizer_state_dict(model, optimizer, state["optimizer"])
    if "rng" in pieces:
        torch.set_rng_state(state["rng"][f"rank{dist.get_rank()}"])
    if "data" in pieces:
        sampler.load(state["data"])
    return int(state["step"])


# --8<-- [end:checkpoint]


# --8<-- [start:train]
def train(
    folder: str,
    steps: int,
    every: int,
    kill: tuple[int, int] | None = None,
    start_from: str | None = None,
    pieces: tuple = PIECES,
) -> dict:
    """Train on this rank, saving every ``every`` steps into ``folder``; resume from
    the newest checkpoint there (or ``start_from``). ``kill`` = (step, rank): that
    rank SIGKILLs itself at that step in the first attempt. Returns the final state
    and what it timed."""
    torch.set_num_threads(1)  # one thread: the same sums in the same order every run
    rank, world, folder = dist.get_rank(), dist.get_world_size(), Path(folder)
    attempt = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    torch.manual_seed(SEED + 1 + rank)  # dropout: each rank its own stream
    model = GPT(CFG, seed=SEED)
    ddp = DDP(model)
    optimizer = torch.optim.Adam(model.parameters(), lr=LR)
    sampler, (ids, targets) = Sampler(POOL, SEED), random_batch(CFG, POOL)
    step, saves, times = 0, [], []
    path = Path(start_from) if start_from else newest(folder)
    if path is not None:
        step = resume(path, model, optimizer, sampler, pieces)
    log(folder, "start", rank, attempt, step)
    for step in range(step, steps):
        if kill == (step, rank) and attempt == 0:
            log(folder, "kill", rank, attempt, step)
            os.kill(os.getpid(), signal.SIGKILL)
        if kill and step == kill[0] and attempt > 0:
            log(folder, "back", rank, attempt, step)  # where the kill happened
        t0 = time.perf_counter()
        rows = sampler.next(rank, world)  # (ROWS,) indices into the pool
        optimizer.zero_grad()
        ddp(ids[rows], targets[rows])[1].backward()  # DDP: mean gradient over ranks
        optimizer.step()
        times.append(time.perf_counter() - t0)
        if (step + 1) % every == 0:
            saves.append(save(folder, model, optimizer, sampler, step + 1))
    weights, adam = get_state_dict(model, optimizer)
    return {
        "weights": {k: v.clone() for k, v in weights.items()},
        "adam": adam["state"],
        "step_s": times,
        "save_s": saves,
    }


def log(folder: Path, event: str, rank: int, attempt: int, step: int) -> None:
    """One line an event, written through at once: the next line may be SIGKILL."""
    line = json.dumps(
        {
            "event": event,
            "rank": rank,
            "attempt": attempt,
            "step": step,
            "t": time.time(),
        }
    )
    fd = os.open(folder / "events.jsonl", os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        os.write(fd, (line + "\n").encode())
        os.fsync(fd)
    finally:
        os.close(fd)


# --8<-- [end:train]


# --8<-- [start:torchrun]
def torchrun(folder: str, steps: int, every: int, kill: tuple[int, int]) -> dict:
    """The job under ``torchrun --max-restarts 1``, in a process session of its own,
    stopped after TORCHRUN_TIMEOUT_S. Afterwards nothing it started may be left."""
    options = f"--standalone --nproc-per-node={WORLD} --max-restarts=1 "
    options += "--monitor-interval=0.1 -m snippets run crash_resume --backend gloo"
    job = f"--steps {steps} --every {every} --kill-step {kill[0]} --kill-rank {kill[1]}"
    argv = torchrun_command(*options.split(), "--worker", folder, *job.split())
    # The workers' process group must not share the rendezvous store: with it, a
    # restarted rank can read a dead peer's address left from the first attempt
    # (pytorch/pytorch#135712) and fail to connect.
    env = {"GLOO_SOCKET_IFNAME": "lo", "TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1"}
    log, start = Path(folder) / "torchrun.log", time.time()
    ended = run_sessions({0: argv}, {0: log}, TORCHRUN_TIMEOUT_S, env=env)
    if ended.stopped:
        raise RuntimeError(f"torchrun ran past {TORCHRUN_TIMEOUT_S:g} s: see {log}")
    left = ended.left  # found by the run's mark, in any session, then killed
    law(not left, f"torchrun left processes behind: {left}")
    text, code = log.read_text(errors="replace"), ended.returncodes[0]
    law(code == 0, f"torchrun exited {code}: {why(text)}")
    return {"seconds": time.time() - start, "output": text}


# --8<-- [end:torchrun]


def why(output: str) -> str:
    """The line of torchrun's output that says what failed (the folder it ran in is
    gone with the run's temporary folder): the last error a worker raised."""
    lines = [x.strip() for x in output.splitlines() if x.strip()]
    errors = [x for x in lines if "Error" in x and not x.startswith("File ")]
    return (errors or lines or ["no output"])[-1][:300]


def run_clean(
    folder: str,
    steps: int,
    every: int,
    start_from: str | None = None,
    pieces: tuple = PIECES,
) -> dict:
    """Two ranks through the project's own launcher: no torchrun, no kill."""
    os.makedirs(folder, exist_ok=True)
    args = (folder, steps, every, None, start_from, pieces)
    return launch(train, WORLD, backend="gloo", timeout_s=GROUP_TIMEOUT_S, args=args)[0]


def same(a: dict, b: dict) -> bool:
    """Bit for bit: every weight, and every tensor of Adam's state."""
    weights = a["weights"].keys() == b["weights"].keys() and all(
        torch.equal(a["weights"][k], b["weights"][k]) for k in a["weights"]
    )
    adam = all(
        torch.equal(a["adam"][p][k], b["adam"][p][k])
        for p in b["adam"]
        for k in b["adam"][p]
    )
    return weights and adam


def events(folder: str) -> list[dict]:
    lines = (Path(folder) / "events.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def lost_time(folder: str, kill: tuple[int, int]) -> dict:
    """From the events: when the rank died, when the job had loaded the checkpoint
    again, when it was back at the step it died at (wall clock, one machine)."""
    seen = events(folder)
    died = next(e for e in seen if e["event"] == "kill")
    resumed = next(
        e
        for e in seen
        if e["event"] == "start" and e["rank"] == kill[1] and e["attempt"] == 1
    )
    back = next(e for e in seen if e["event"] == "back" and e["rank"] == kill[1])
    law(
        died["attempt"] == 0 and resumed["attempt"] == back["attempt"] == 1,
        "the first attempt died and the second resumed",
    )
    return {
        "resumed from step": resumed["step"],
        "steps redone": kill[0] - resumed["step"],
        "restart s": resumed["t"] - died["t"],
        "redo s": back["t"] - resumed["t"],
        "lost s": back["t"] - died["t"],
    }


# --8<-- [start:young_daly]
def young_daly(delta: float, mtbf: float) -> float:
    """τ_opt = √(2δM): the interval where saving (δ/τ) and redoing (τ/2M) balance."""
    return math.sqrt(2 * delta * mtbf)


def waste(tau: float, delta: float, mtbf: float, restart: float) -> float:
    """Expected fraction of time lost, first order: a save every τ costs δ/τ; a
    failure every M costs the restart and half an interval, (R + τ/2)/M."""
    return delta / tau + (restart + tau / 2) / mtbf


def chart(delta: float, restart: float) -> dict:
    mtbfs = {"M = 10 min": 600.0, "M = 1 h": 3600.0, "M = 1 day": 86400.0}
    taus = [delta * 2 ** (i / 2) for i in range(2, 48)]  # from 2δ, √2 apart
    series = {
        name: [(t, waste(t, delta, m, restart)) for t in taus if t < m]
        for name, m in mtbfs.items()
    }
    series["τ_opt = √(2δM)"] = [
        (young_daly(delta, m), waste(young_daly(delta, m), delta, m, restart))
        for m in mtbfs.values()
    ]
    return line_chart(
        series,
        title=f"Time lost against the checkpoint interval (δ = {delta * 1e3:.0f} ms, "
        f"R = {restart:.1f} s, measured)",
        x_label="interval τ (seconds)",
        y_label="fraction of time lost",
        log_x=True,
        log_y=True,
        description="δ/τ + (R + τ/2)/M for three mean times between failures M; "
        "the last series joins each curve's minimum, √(2δM).",
    )


# --8<-- [end:young_daly]


def optimum_sentence(delta: float) -> str:
    """τ_opt for the δ measured in this run, at the chart's three values of M."""
    at = [
        f"{young_daly(delta, m):.0f} s for M = {name}"
        for name, m in (("10 min", 600.0), ("1 h", 3600.0), ("1 day", 86400.0))
    ]
    return (
        f"With δ = {delta * 1e3:.0f} ms as measured here, τ_opt = √(2δM) is "
        f"{', '.join(at[:2])} and {at[2]}."
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--steps", type=positive_int, default=STEPS)
    parser.add_argument(
        "--every", type=positive_int, action="append", help="checkpoint interval k"
    )
    parser.add_argument("--kill-step", type=nonnegative_int, default=KILL_STEP)
    parser.add_argument("--kill-rank", type=nonnegative_int, default=KILL_RANK)
    parser.add_argument("--worker", metavar="DIR", help=argparse.SUPPRESS)


def main(
    steps: int = STEPS,
    every: list[int] | None = None,
    kill_step: int = KILL_STEP,
    kill_rank: int = KILL_RANK,
    worker: str | None = None,
) -> dict | None:
    intervals = tuple(every or INTERVALS)
    if worker:  # a rank under torchrun: train, and leave the result in the folder
        out = train(worker, steps, intervals[0], (kill_step, kill_rank))
        if dist.get_rank() == 0:
            torch.save(out, Path(worker) / "final.pt")
        return None
    if kill_step >= steps:
        raise UsageError(
            f"--kill-step {kill_step} is past the end: the run has steps 0 to "
            f"{steps - 1}; choose one of those"
        )
    if kill_rank >= WORLD:
        raise UsageError(f"--kill-rank {kill_rank}: the job has ranks 0 and 1")
    kill = (kill_step, kill_rank)
    with tempfile.TemporaryDirectory(prefix="commonplace-resume-") as tmp:
        clean = run_clean(f"{tmp}/clean", steps, 1)  # saves every step: δ, steps
        rows = []
        for k in intervals:
            folder = f"{tmp}/k{k}"
            os.makedirs(folder)
            ran = torchrun(folder, steps, k, kill)
            equal = same(torch.load(Path(folder) / "final.pt"), clean)
            law(equal, f"k={k}: resumed weights differ from the uninterrupted run")
            rows.append(
                {
                    "interval k": k,
                    **lost_time(folder, kill),
                    "torchrun s": ran["seconds"],
                    "bit-identical": equal,
                }
            )
        ablation = leave_out(tmp, steps, intervals[-1], kill, clean)
    delta = Spread.of(clean["save_s"])
    step_s = Spread.of(clean["step_s"])
    restart = Spread.of([r["restart s"] for r in rows]).median
    said = check(CLAIMS, {"rows": rows, "step_ms": step_s.median * 1e3})
    print(
        f"tiny GPT, dropout {CFG.dropout}, DDP on {WORLD} gloo ranks, {steps} steps; "
        f"rank {kill_rank} SIGKILLed at step {kill_step}"
    )
    for r in rows:
        print(
            f"k={r['interval k']}: resumed at step {r['resumed from step']}, "
            f"redid {r['steps redone']} step(s); lost {r['lost s']:.2f} s "
            f"(restart {r['restart s']:.2f} s); final weights bit-identical ✓"
        )
    for r in ablation:
        print(f"restore without {r['left out']}: equal = {r['bit-identical']} ✓")
    print(
        f"save δ = {delta.text(1, 1e3)} ms, step = {step_s.text(1, 1e3)} ms "
        "(median [IQR])"
    )
    said.append(optimum_sentence(delta.median))
    print(*said, sep="\n")
    return {
        "tables": {"runs": rows, "leave_out": ablation},
        "figures": {"young_daly": chart(delta.median, restart)},
        "markdown": {"claims": " ".join(said)},
        "delta_s": delta.median,
        "step_s": step_s.median,
        "restart_s": restart,
        "provenance": {"backend": "gloo", "world_size": WORLD},
    }


def leave_out(tmp: str, steps: int, k: int, kill, clean: dict) -> list[dict]:
    """Resume the last crash run's checkpoint with one piece left out: each must
    change the final weights (the check of the check)."""
    start = newest_before(Path(f"{tmp}/k{k}"), kill[0])
    rows = []
    for piece in PIECES[1:]:
        folder = f"{tmp}/without-{piece}"
        os.makedirs(folder)
        kept = tuple(p for p in PIECES if p != piece)
        got = run_clean(folder, steps, k, start_from=str(start), pieces=kept)
        equal = same(got, clean)
        law(not equal, f"leaving out {piece} changed nothing")
        rows.append({"left out": piece, "bit-identical": equal})
    return rows


def newest_before(folder: Path, step: int) -> Path:
    """The checkpoint the crash resumed from: the newest at or before ``step``."""
    done = [p.parent for p in folder.glob("step*/.metadata")]
    return max(p for p in done if int(p.name[4:]) <= step)


def _redo_share(d: dict) -> str:
    share = max(r["redo s"] / r["restart s"] for r in d["rows"])
    return "restart" if share < 0.1 else "both"


CLAIMS = [
    Observation(
        says={
            "restart": "At this size the restart, not the interval, is what a failure "
            "costs: on this run the steps redone took less than a tenth of the "
            "restart every time.",
            "both": "On this run the steps redone took a tenth of the restart or more "
            "at least once: here the interval costs a failure as well as the restart.",
        },
        judge=_redo_share,
        cases={
            "restart": {"rows": [{"redo s": 0.05, "restart s": 3.0}]},
            "both": {"rows": [{"redo s": 0.9, "restart s": 3.0}]},
        },
    ),
]


if __name__ == "__main__":
    raise SystemExit(main_entry(main, SPEC))
