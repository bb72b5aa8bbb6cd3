"""``python -m snippets size``: how big, how fast, and what the communication costs.

    python -m snippets size --preset llama3-8b --seq 8192 --micro-batch 2 --dp 8 \\
        --zero 3 --recompute selective --gpu h100-sxm [--json]
    python -m snippets size --layers 32 --hidden 4096 --heads 32 --kv-heads 8 \\
        --ffn 14336 --vocab 128256 --arch llama --seq 8192 --tp 8
    python -m snippets size --params 7.5e9 --dp 64 --zero 2 --grad-bytes 2
    python -m snippets size --preset mixtral-8x7b --seq 4096 --dp 8 --ep 8 --zero 1
    python -m snippets size --preset tiny-gpt --dp 2 --gpu this-machine
    python -m snippets size --list

A preset's dimensions can be overridden one by one (``--preset llama3-8b --layers
16``). Impossible inputs (heads not divisible by tp, dp·tp·pp·cp ≠ --gpus, a global
batch that micro-batch × dp does not divide, an unknown preset, --top-k above the
experts, experts that --ep does not divide, more than 2^20 GPUs...) get one line and
exit status 2. An answer computed but meaningless alone (memory beyond every GPU, an
MFU that rounds to 0.0%) comes with a line that says why.
``--experts E --top-k K`` (and the other expert flags) make a model's feed-forward
layers MoE; the conventions (what is active, EP folded inside DP) are in
``snippets/sizing/params.py``.

``--gpu this-machine`` is the machine the command runs on, as measured: the
roofline's ``results/roofline.json`` and the latency note's α-β fit,
``results/cost_model.json`` (``presets.this_machine``: each of the dp·tp·pp·cp ranks
gets its share of the cores). Without those results it says which snippet to run.

``--json`` prints one object (numbers are plain floats or ints, bytes in bytes,
seconds in seconds; the formulas are in the modules named):

    params                   int, every parameter once            (params)
    params_active            int, what one token touches (= params if dense)
    params_per_gpu           the most loaded GPU's, TP × PP (× EP) split (params)
    params_held_per_gpu      what it keeps between layers: ÷ dp·cp under ZeRO-3
    expert_params_per_gpu    its routed experts' share (0 if dense)
    all_to_all_bytes_per_moe_layer  one GPU, one micro-batch: dispatch and combine,
                             forward and backward (traffic)
    memory_bytes             {weights, gradients, optimizer, activations, buffers,
                              total} on the most loaded GPU (memory, activations);
                              buffers = ZeRO-3's gathered layer
    memory_capacity_bytes    the GPU's HBM;  fits: total ≤ capacity (bool)
    flops_per_token          6N + 12LHQT (÷2 with --causal-halving): MFU's (flops)
    hardware_flops_per_token plus recompute: HFU's (flops)
    comm_bytes_per_step      {dp, tp, pp, cp, ep}: bytes one GPU sends a step
    comm_seconds_per_step    {dp, tp, pp, cp, ep}: α-β seconds (traffic)
    compute_seconds_per_step hardware FLOPs ÷ (peak × efficiency) (throughput)
    bubble_factor            1 + (p - 1)/(v·m);  microbatches: m
    step_time_s, tokens_per_s, mfu, hfu                            (throughput)
    warnings                 {field: why}: what a computed answer cannot say on its
                             own (estimate.warnings); {} mostly
    inputs                   {model: {...}, gpu: {...}, and every setup key}
"""

from __future__ import annotations

import argparse
import json
import math
import os

from snippets.core.cli import (
    OneLineParser,
    nonnegative_float,
    nonnegative_int,
    positive_float,
    positive_int,
)
from snippets.core.errors import UsageError
from snippets.core.results import needed
from snippets.sizing import estimate, presets
from snippets.sizing.memory import PRECISIONS
from snippets.sizing.size_table import presets_table, table

SHAPE = ("layers", "hidden", "heads", "kv_heads", "ffn", "vocab")
MOE = {  # model keys of a mixture of experts, and their flags' help
    "experts": "routed experts E a MoE layer (makes the model MoE)",
    "top_k": "routed experts a token goes to",
    "shared_experts": "experts every token goes to (0)",
    "expert_ffn": "an expert's MLP width (--ffn)",
    "moe_every": "every k-th layer is MoE (1)",
    "dense_layers": "the first layers stay dense (0)",
}


def parser() -> OneLineParser:
    p = OneLineParser(
        prog="python -m snippets size", description=__doc__.split("\n")[0]
    )
    p.add_argument("--list", action="store_true", help="list the presets and exit")
    p.add_argument("--preset", help=f"one of: {', '.join(presets.MODELS)}")
    for name in SHAPE:
        p.add_argument(f"--{name.replace('_', '-')}", type=positive_int)
    p.add_argument("--arch", choices=("gpt", "llama"))
    for name, help_ in MOE.items():
        kind = nonnegative_int if name in ("shared_experts", "dense_layers") else None
        p.add_argument(
            f"--{name.replace('_', '-')}", type=kind or positive_int, help=help_
        )
    p.add_argument("--params", type=positive_float, metavar="N", help="a bare count")
    for name, help_ in (
        ("seq", "tokens a sequence (default: the preset's context)"),
        ("micro-batch", "sequences a GPU runs at once (1)"),
        ("global-batch", "sequences a step (micro-batch × dp)"),
        ("dp", "data-parallel ranks"),
        ("tp", "tensor-parallel ranks"),
        ("pp", "pipeline stages"),
        ("vpp", "interleaved chunks a stage"),
        ("cp", "context-parallel ranks"),
        ("ep", "expert-parallel ranks, folded inside dp"),
        ("gpus", "total GPUs (default dp·tp·pp·cp; must equal it)"),
        ("gpus-per-node", "GPUs joined by NVLink (8)"),
    ):
        p.add_argument(f"--{name}", type=positive_int, help=help_)
    p.add_argument("--zero", type=nonnegative_int, default=0, choices=range(4))
    p.add_argument("--sequence-parallel", action="store_true")
    p.add_argument("--recompute", choices=("none", "selective", "full"), default="none")
    p.add_argument("--no-flash", action="store_true", help="keep the s² scores")
    p.add_argument("--precision", choices=tuple(PRECISIONS), default="bf16-mixed")
    p.add_argument("--optimizer", choices=("adam", "sgd"), default="adam")
    p.add_argument("--grad-bytes", type=positive_float, help="2: the ZeRO paper's")
    p.add_argument(
        "--gpu", default="h100-sxm", help=f"one of: {', '.join(hardware_names())}"
    )
    p.add_argument("--intra-link", choices=("nvlink", "pcie"), default="nvlink")
    p.add_argument("--efficiency", type=positive_float, help="compute MFU (0.5)")
    p.add_argument("--overlap", type=nonnegative_float, help="DP/CP hidden (0)")
    p.add_argument("--causal-halving", action="store_true", help="Megatron's ÷2")
    p.add_argument("--json", action="store_true", help="one JSON object")
    return p


def resolve_model(opts: argparse.Namespace) -> dict:
    """The preset (if any) with each given dimension put over it."""
    given = {k: getattr(opts, k) for k in SHAPE if getattr(opts, k) is not None}
    if opts.params is not None:
        if opts.preset or given or any(getattr(opts, k) is not None for k in MOE):
            raise UsageError("--params is a bare count: give it without a shape")
        return {"params": round(opts.params), "seq": opts.seq}
    if opts.preset is not None:
        if opts.preset not in presets.MODELS:
            names = ", ".join(presets.MODELS)
            raise UsageError(f"unknown preset {opts.preset!r}: choose one of {names}")
        model = dict(presets.MODELS[opts.preset])
    else:
        missing = [k for k in SHAPE if k not in given and k not in ("kv_heads", "ffn")]
        if missing:
            flags = " ".join(f"--{k.replace('_', '-')}" for k in missing)
            raise UsageError(f"give --preset, --params or the shape: {flags} missing")
        arch = opts.arch or "gpt"
        model = {"arch": arch, "seq": opts.seq, "tied": arch == "gpt"}
        model["bias"] = arch == "gpt"
        model |= {"kv_heads": given["heads"], "ffn": 4 * given["hidden"]}
    if opts.arch is not None:
        model["arch"] = opts.arch
    moe = {k: getattr(opts, k) for k in MOE if getattr(opts, k) is not None}
    if moe and not model.get("experts") and "experts" not in moe:
        raise UsageError("--top-k and the other expert flags need --experts")
    if "experts" in moe and not model.get("experts") and "top_k" not in moe:
        raise UsageError("--experts needs --top-k: how many experts a token visits")
    return model | given | moe


def setup(opts: argparse.Namespace) -> dict:
    keys = ("seq", "micro_batch", "global_batch", "dp", "tp", "pp", "vpp", "cp", "ep")
    keys += ("gpus", "gpus_per_node", "precision", "grad_bytes", "efficiency")
    found = {k: getattr(opts, k) for k in keys + ("overlap",)}
    found = {k: v for k, v in found.items() if v is not None}
    return found | {
        "zero": opts.zero,
        "sequence_parallel": opts.sequence_parallel,
        "recompute": opts.recompute,
        "flash": not opts.no_flash,
        "optimizer": opts.optimizer,
        "intra_link": opts.intra_link,
        "causal_halving": opts.causal_halving,
    }


def hardware_names() -> list[str]:
    return [*presets.GPUS, presets.THIS_MACHINE]


def measured_machine(ranks: int) -> dict:
    """``presets.this_machine`` from this machine's results, for ``ranks`` ranks."""
    found = needed("roofline", "cost_model", by=f"--gpu {presets.THIS_MACHINE}")
    pages = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    cores = os.cpu_count() or 1
    return presets.this_machine(found["roofline"], found["cost_model"], ranks,
                                cores, pages)  # fmt: skip


def size(argv: list[str] | None = None) -> int:
    """Parse, estimate, print; a UsageError is raised for the caller's one line."""
    opts = parser().parse_args(argv)
    if opts.list:
        print(presets_table())
        return 0
    if opts.gpu not in hardware_names():
        names = ", ".join(hardware_names())
        raise UsageError(f"unknown GPU {opts.gpu!r}: choose one of {names}")
    model = resolve_model(opts)
    if model.get("seq") is None:
        raise UsageError("give --seq: only a preset knows its context length")
    found = setup(opts)
    if opts.gpu == presets.THIS_MACHINE:
        grid = (found.get(k, 1) for k in ("dp", "tp", "pp", "cp"))
        gpu = measured_machine(found.get("gpus") or math.prod(grid))
    else:
        gpu = presets.GPUS[opts.gpu]
    result = estimate.estimate(model, gpu, **found)
    result["inputs"] |= {"preset": opts.preset, "gpu_name": opts.gpu}
    print(json.dumps(result) if opts.json else table(result))
    return 0
