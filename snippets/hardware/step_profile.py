"""Every op of one training step of the tiny GPT, counted by formula, timed by
``torch.profiler``, and placed on this machine's measured roofline.

One step is forward, backward (with the project's DDP, whose bucketed all-reduces run
while backward does) and AdamW's update, on 2 ranks. Each op class gets its FLOPs and
bytes from the shapes alone (T = B·N tokens a rank, width d, vocabulary V, s bytes an
element; "bytes" counts each operand read or written once, the roofline's convention):

* matmul: every Linear's (T, k) @ (k, n) is 2Tkn FLOPs forward, and backward's two
  matmuls (dX = dY·W, dW = dYᵀ·X) do the same again each: 3 × 2Tkn in all;
* attention (fused SDPA): per layer 4·B·N²·d FLOPs forward (QKᵀ and PV) and 10·B·N²·d
  backward (the scores recomputed, then four matmuls), torch's FlopCounterMode
  formulas, the causal half not subtracted; it never writes the N × N scores;
* softmax: the log-softmax of the (T, V) logits, the first half of cross-entropy (the
  attention's own softmax is inside the fused kernel); cross-entropy: its second half,
  picking each target's log-probability (NLL) and its gradient, a (T, V) write;
* layer norm, GELU: per element 7 and 5 FLOPs forward (each add, multiply, square
  root, erf or exp counted once), twice that backward, as a matmul's backward is;
* embedding: a gather forward, a scatter-add of T·d gradients backward;
* optimizer: AdamW, 14 FLOPs and 7 tensors moved (p, g, m, v read; p, m, v written)
  per parameter, as a fused update would; torch's CPU loop makes more passes;
* all-reduce: the DDP buckets, timed by the α-β(-γ) ring formula with the latency
  note's fitted α, β, γ; it runs on gloo's threads, beside backward.

FlopCounterMode checks the matmul and attention FLOPs (it counts no element-wise op).
The profile's ``gloo:all_reduce`` events must be as many as the DDP note's
``assign_buckets`` gives for this model and ``bucket_cap_mb``.

    python -m snippets run step_profile [--rows B] [--rounds R] [--bucket-cap-mb C]
"""

from __future__ import annotations

import argparse
import os
import time
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch.profiler import ProfilerActivity, profile
from torch.utils import flop_counter
from torch.utils.flop_counter import FlopCounterMode

from snippets.core import timing
from snippets.core.charts import line_chart
from snippets.core.claims import Spread, law, ratio_sentence
from snippets.core.cli import main_entry, positive_float, positive_int
from snippets.core.results import needed
from snippets.core.runtime import Spec, print0
from snippets.models.tiny_gpt import GPT, GPTConfig, random_batch
from snippets.parallel.data.ddp import DDP
from snippets.parallel.data.ddp_buckets import assign_buckets, bucket_bytes
from snippets.sizing.cost_formulas import Machine, ring_cost

SPEC = Spec(
    summary="one training step's ops, by formula and profiler, on the roofline",
    world_size=2,  # so that DDP's all-reduces exist
    timed=True,  # it measures time: run-all runs nothing beside it
    reads=("roofline", "cost_model"),  # the roof; the all-reduce's α, β, γ
)
CONFIG = GPTConfig(vocab_size=256, block_size=64, n_layer=2, n_head=4, n_embd=128)


# --8<-- [start:formulas]
@dataclass(frozen=True)
class Call:
    flops: float
    bytes: float


def op_costs(cfg: GPTConfig, rows: int, s: int = 4) -> dict[str, list[Call]]:
    """Every call of each op class in one step of one rank, forward then backward."""
    B, N, L, d, V = rows, cfg.block_size, cfg.n_layer, cfg.n_embd, cfg.vocab_size
    T, H, P, ids = B * N, cfg.n_head, cfg.num_params(), 8  # int64 token ids
    linears = [(d, d)] * 4 + [(d, 4 * d), (4 * d, d)]  # q, k, v, proj; fc, proj
    mm = [Call(2 * T * k * n, (T * k + k * n + T * n) * s)
          for k, n in linears * L + [(d, V)]]  # fmt: skip
    fwd = Call(4 * B * N * N * d, (4 * T * d + B * H * N) * s)  # q,k,v in; out, lse
    bwd = Call(10 * B * N * N * d, (8 * T * d + B * H * N) * s)  # + dO, out; dq,dk,dv
    norm = [Call(7 * T * d, (2 * T * d + 2 * d + 2 * T) * s),
            Call(14 * T * d, (3 * T * d + 3 * d + 2 * T) * s)]  # fmt: skip
    gelu = [
        Call(5 * T * 4 * d, 2 * T * 4 * d * s),
        Call(10 * T * 4 * d, 3 * T * 4 * d * s),
    ]
    return {
        "matmul": mm + mm + mm,  # forward, dX, dW: the same shapes, permuted
        "attention": [fwd] * L + [bwd] * L,
        "softmax": [Call(5 * T * V, 2 * T * V * s), Call(4 * T * V, 3 * T * V * s)],
        "cross-entropy": [Call(T, T * (ids + s)), Call(T, T * V * s + T * ids)],
        "layer norm": [norm[0]] * (2 * L + 1) + [norm[1]] * (2 * L + 1),
        "GELU": [gelu[0]] * L + [gelu[1]] * L,
        "embedding": [
            Call(0, T * ids + 2 * T * d * s),
            Call(0, N * ids + 2 * N * d * s),
            Call(T * d, (T * d + V * d) * s + T * ids),
            Call(N * d, (2 * N * d) * s + N * ids),
        ],  # fmt: skip
        "optimizer": [Call(14 * P, 7 * P * s)],
    }


def allreduce_costs(bucket_bytes: list[int], p: int) -> list[Call]:
    """A ring all-reduce of n bytes: each rank sends and receives 2(p-1)/p·n bytes and
    adds (p-1)/p of the elements (fp32: 4 bytes each)."""
    return [Call((p - 1) / p * n / 4, 2 * (p - 1) / p * n) for n in bucket_bytes]


def roofline_time(calls: list[Call], peak: float, bandwidth: float) -> float:
    """Each call at its own roof: the slower of its FLOPs and its bytes."""
    return sum(max(c.flops / peak, c.bytes / bandwidth) for c in calls)


# --8<-- [end:formulas]


# --8<-- [start:profile]
# The op each class runs as, in the profiler's names. None of them runs inside
# another (a Linear's addmm is counted, the aten::linear around it is not).
EVENTS = {
    "matmul": ("aten::mm", "aten::addmm", "aten::bmm"),
    "attention": ("aten::_scaled_dot_product_flash_attention_for_cpu",
                  "aten::_scaled_dot_product_flash_attention_for_cpu_backward"),
    "softmax": ("aten::_log_softmax", "aten::_log_softmax_backward_data"),
    "cross-entropy": ("aten::nll_loss_forward", "aten::nll_loss_backward"),
    "layer norm": ("aten::native_layer_norm", "aten::native_layer_norm_backward"),
    "GELU": ("aten::gelu", "aten::gelu_backward"),
    "embedding": ("aten::embedding", "aten::embedding_dense_backward"),
    "optimizer": ("Optimizer.step#AdamW.step",),
    "all-reduce": ("gloo:all_reduce",),  # on gloo's own threads
}  # fmt: skip
CLASS_OF = {name: op for op, names in EVENTS.items() for name in names}


def classify(spans: list[tuple[str, int, int]]) -> dict[str, dict]:
    """(name, start ns, end ns) of every event → per class: calls, and seconds on the
    main thread (the all-reduce: the time at least one was in flight, the union of
    its events' spans, since gloo runs them beside backward)."""
    out = {op: {"calls": 0, "seconds": 0.0} for op in EVENTS}
    flight, end = [], 0
    for name, a, b in spans:
        if (op := CLASS_OF.get(name)) is not None:
            out[op]["calls"] += 1
            if op == "all-reduce":
                flight.append((a, b))
            else:
                out[op]["seconds"] += (b - a) / 1e9
    for a, b in sorted(flight):  # the union of the all-reduces' spans
        out["all-reduce"]["seconds"] += max(0, b - max(a, end)) / 1e9
        end = max(end, b)
    return out


def profiled(step, kept: list) -> None:
    """One step under the profiler; its classes and wall time appended to ``kept``."""
    os.environ.setdefault("KINETO_LOG_LEVEL", "6")  # no "USDT" lines on stderr
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        start = time.perf_counter()
        step()
        wall = time.perf_counter() - start
    events = prof.profiler.kineto_results.events()  # raw: no tree built, ~100× faster
    spans = [(e.name(), e.start_ns(), e.start_ns() + e.duration_ns()) for e in events]
    kept.append({"wall": wall, "classes": classify(spans)})


# --8<-- [end:profile]


def counted_flops(cfg: GPTConfig, rows: int) -> dict[str, int]:
    """FlopCounterMode's count of one forward and backward, by class. Its registry has
    no entry for the CPU's fused attention, so torch's own SDPA formulas are handed
    to it for those two ops (the same shapes as the CUDA kernels they stand for)."""
    aten = torch.ops.aten
    mapping = {  # shapes in (torch's shape wrapper), FLOPs out
        aten._scaled_dot_product_flash_attention_for_cpu: (
            lambda q, k, v, *_, **__: flop_counter.sdpa_flop_count(q, k, v)
        ),
        aten._scaled_dot_product_flash_attention_for_cpu_backward: (
            lambda g, q, k, v, *_, **__: flop_counter.sdpa_backward_flop_count(
                g, q, k, v
            )
        ),
    }
    model, (idx, targets) = GPT(cfg), random_batch(cfg, rows)
    with FlopCounterMode(display=False, custom_mapping=mapping) as counter:
        model(idx, targets)[1].backward()
    by_op = {str(k): v for k, v in counter.get_flop_counts()["Global"].items()}
    mm = ("aten.mm", "aten.addmm", "aten.bmm")
    return {
        "matmul": sum(v for k, v in by_op.items() if k in mm),
        "attention": sum(v for k, v in by_op.items() if "scaled_dot" in k),
    }


def load_roof(p: int) -> dict:
    """This rank's roof: the roofline note's measured peak and bandwidth, shared by the
    ranks on this machine (a rank gets its threads' share of the cores), and the
    latency note's α, β, γ."""
    found = needed("roofline", "cost_model")
    share = min(1.0, torch.get_num_threads() / (os.cpu_count() or 1))
    r, c = found["roofline"], found["cost_model"]
    return {
        "share": share,
        "peak": r["peak_matmul_flops"] * share,
        "bandwidth": r["bandwidth_bytes_per_s"] * share,
        "machine": Machine(c["alpha_s"], c["beta_s_per_byte"], c["gamma_s_per_byte"]),
    }


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--rows", type=positive_int, default=8, help="B a rank")
    parser.add_argument("--rounds", type=positive_int, default=7)
    parser.add_argument("--bucket-cap-mb", type=positive_float, default=0.25)


# --8<-- [start:main]
def main(rows: int = 8, rounds: int = 7, bucket_cap_mb: float = 0.25) -> dict:
    p, cfg = dist.get_world_size(), CONFIG
    roof, load = load_roof(p), [os.getloadavg()[0]]  # other work on the machine
    model = DDP(GPT(cfg), bucket_cap_mb=bucket_cap_mb)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    idx, targets = random_batch(cfg, rows * p)
    rank = dist.get_rank()
    idx, targets = idx.tensor_split(p)[rank], targets.tensor_split(p)[rank]  # (B, N)

    def step() -> None:
        model(idx, targets)[1].backward()  # DDP's all-reduces start in here
        opt.step()
        opt.zero_grad()

    kept: list[dict] = []
    times = timing.interleave(
        {"plain step": step, "profiled step": lambda: profiled(step, kept)}, rounds
    )
    kept, load = kept[-rounds:], load + [os.getloadavg()[0]]  # warm-up's not kept
    # the cross-note check: one all-reduce per bucket the DDP note's function assigns
    buckets = assign_buckets([t for t in model.module.parameters()], bucket_cap_mb)
    seen = {k["classes"]["all-reduce"]["calls"] for k in kept}
    law(seen == {len(buckets)}, f"all-reduce events {seen} ≠ {len(buckets)} buckets")
    costs = op_costs(cfg, rows)
    counted = counted_flops(cfg, rows)
    for op, flops in counted.items():
        ours = sum(c.flops for c in costs[op])
        law(ours == flops, f"{op}: formula {ours} ≠ FlopCounterMode {flops}")
    nbytes = [bucket_bytes(model.params, b) for b in buckets]
    costs["all-reduce"] = allreduce_costs(nbytes, p)
    rows_out = place(costs, kept, roof, nbytes, p)
    walls = torch.tensor([k["wall"] for k in kept], dtype=torch.float64)
    dist.all_reduce(walls, op=dist.ReduceOp.MAX)  # the slowest rank's, as the harness
    plain = times.wall["plain step"]  # the same rounds, the slowest rank's
    ratios = [a / b for a, b in zip(walls.tolist(), plain)]  # profiled ÷ plain
    step = {"plain_s": Spread.of(plain), "profiled_ratio": ratios, "load": load}
    said = findings(rows_out, roof, step, len(buckets), bucket_cap_mb)
    for line in said:
        print0(line)
    return {
        "tables": {"ops": table(rows_out), "flops": flops_table(costs, counted)},
        "figures": {"roofline": figure(rows_out, roof)},
        "markdown": {"findings": "\n\n".join(said)},
        "ops": [{k: jsonable(v) for k, v in r.items()} for r in rows_out],
        "step": {k: jsonable(v) for k, v in step.items()},
        "buckets": len(buckets),
        "roof": {k: v for k, v in roof.items() if k != "machine"},
        "provenance": {"backend": dist.get_backend(), "world_size": p},
    }


# --8<-- [end:main]


def jsonable(v):
    return v._asdict() if isinstance(v, Spread) else v


def place(
    costs: dict, kept: list[dict], roof: dict, nbytes: list[int], p: int
) -> list[dict]:
    """Each class: formula, measured spread over the rounds, and where it sits."""
    knee = roof["peak"] / roof["bandwidth"]
    out = []
    for op, calls in costs.items():
        flops, moved = sum(c.flops for c in calls), sum(c.bytes for c in calls)
        if op == "all-reduce":
            predicted = sum(ring_cost(p).time(n, roof["machine"]) for n in nbytes)
            bound = "network"
        else:
            predicted = roofline_time(calls, roof["peak"], roof["bandwidth"])
            bound = "compute" if flops / moved > knee else "memory"
        seconds = [k["classes"][op]["seconds"] for k in kept]
        share = [k["classes"][op]["seconds"] / k["wall"] for k in kept]
        out.append({
            "op": op, "calls": kept[-1]["classes"][op]["calls"],
            "formula_calls": len(calls), "flops": flops, "bytes": moved,
            "intensity": flops / moved, "bound": bound,
            "seconds": Spread.of(seconds), "predicted_s": predicted,
            "of_formula": Spread.of([s / predicted for s in seconds]),
            "achieved": Spread.of([flops / s for s in seconds if s > 0] or [0.0]),
            "share": Spread.of(share),
        })  # fmt: skip
    return out


def table(rows: list[dict]) -> list[dict]:
    return [
        {"op": r["op"], "calls": r["calls"], "MFLOP": round(r["flops"] / 1e6, 2),
         "MB": round(r["bytes"] / 1e6, 2), "FLOP/byte": round(r["intensity"], 2),
         "bound": r["bound"], "ms, median [IQR]": r["seconds"].text(2, 1e3),
         "formula ms": round(r["predicted_s"] * 1e3, 3),
         "measured ÷ formula": r["of_formula"].text(1),
         "GFLOP/s": round(r["achieved"].median / 1e9, 2),
         "share of step": r["share"].text(2)}
        for r in rows
    ]  # fmt: skip


def flops_table(costs: dict, counted: dict) -> list[dict]:
    return [
        {"op": op, "formula FLOPs": int(sum(c.flops for c in costs[op])),
         "FlopCounterMode": n, "equal": "✓"}
        for op, n in counted.items()
    ]  # fmt: skip


def figure(rows: list[dict], roof: dict) -> dict:
    peak, bw = roof["peak"], roof["bandwidth"]
    xs = [r["intensity"] for r in rows]
    grid = sorted({min(xs) / 2, peak / bw, max(xs) * 2})
    series = {"this rank's roof: min(peak, bandwidth × I)":
              [(x, min(peak, bw * x) / 1e9) for x in grid]}  # fmt: skip
    for r in rows:
        if r["achieved"].median > 0:
            series[r["op"]] = [(r["intensity"], r["achieved"].median / 1e9)]
    return line_chart(
        series,
        title=f"One step's ops on the roofline: knee at {peak / bw:.1f} FLOP/byte",
        x_label="arithmetic intensity (FLOP/byte, by formula)",
        y_label="GFLOP/s achieved (median)",
        log_x=True,
        log_y=True,
        description="Each op class of a tiny GPT training step: formula FLOPs over "
        "measured time, against the roof of one rank's share of this machine.",
    )


def findings(
    rows: list[dict], roof: dict, step: dict, buckets: int, cap: float
) -> list[str]:
    """The sentences the note states, rendered from this run."""
    knee = roof["peak"] / roof["bandwidth"]
    by = {b: [r["op"] for r in rows if r["bound"] == b] for b in ("compute", "memory")}
    biggest = sorted(rows, key=lambda r: -r["share"].median)
    ar = next(r for r in rows if r["op"] == "all-reduce")
    main_thread = [r for r in rows if r["op"] != "all-reduce"]
    formula = sum(r["predicted_s"] for r in main_thread)
    plain, rounds = step["plain_s"], len(step["profiled_ratio"])
    return [
        f"Right of this rank's knee ({knee:.1f} FLOP/byte), compute-bound: "
        f"{', '.join(by['compute'])}. Left of it, memory-bound: "
        f"{', '.join(by['memory'])}. The all-reduce is bound by the link.",
        f"Share of a profiled step's wall time (median [IQR] over {rounds} "
        "rounds): "
        + "; ".join(f"{r['op']} {r['share'].text(2)}" for r in biggest)
        + ". The all-reduce's share is the time one was in flight, beside backward.",
        "Measured ÷ formula time (median [IQR]): "
        + "; ".join(f"{r['op']} {r['of_formula'].text(1)}" for r in rows)
        + ".",
        f"Every class's roofline time added up, the all-reduce left out (it overlaps "
        f"backward): {formula * 1e3:.2f} ms; a plain step took "
        f"{plain.text(2, 1e3)} ms, {Spread(*plain).text(1, 1 / formula)}× the "
        "formula.",
        f"The profile saw {ar['calls']} gloo all-reduces on each rank: the "
        f"{buckets} buckets the DDP note's assign_buckets makes of this model at "
        f"{cap:g} MiB.",
        ratio_sentence(
            step["profiled_ratio"],
            "A step under the profiler ÷ a plain step of the same round",
            "the profiler slows the step",
            "the profiled step was faster",
        ),
        f"Load: the machine's 1-minute load average was {step['load'][0]:.1f} when "
        f"the timing began and {step['load'][1]:.1f} when it ended, on "
        f"{os.cpu_count()} cores.",
    ]


if __name__ == "__main__":
    raise SystemExit(main_entry(main, SPEC))
