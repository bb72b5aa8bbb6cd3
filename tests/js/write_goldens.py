"""Golden cases for the site's JavaScript ports, computed by the Python they port.

``docs/assets/sizing/formulas.js``, ``estimate.js`` and ``cli.js`` port
``snippets/sizing/`` (the formula modules, ``estimate()``, ``python -m snippets
size``); ``docs/assets/viewer/overlay.js`` ports ``snippets/viewer/``'s
``parallel_overlay.py``, ``overlay_bytes.py`` and ``overlay_dp.py``. This imports
those Python functions, runs them on a spread of inputs (every preset, custom and odd
shapes, each ZeRO stage, tensor, pipeline, context and data-parallel layouts, odd
degrees, impossible inputs) and writes what they return into a folder; ``node --test
tests/js/`` holds the ports to it. ``make test`` runs both, so the goldens are always
today's Python's.

    python tests/js/write_goldens.py [OUT_DIR]     (default: tests/js/goldens/)
"""

from __future__ import annotations

import io
import itertools
import json
import random
import sys
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

from snippets.__main__ import main as cli_main
from snippets.core.errors import UsageError
from snippets.sizing import (
    activations,
    flops,
    memory,
    params,
    presets,
    throughput,
    traffic,
)
from snippets.sizing.sizing_widget import widget_data
from snippets.viewer import overlay_bytes, overlay_dp, parallel_overlay
from snippets.viewer.parallel_overlay import Degrees

OUT = Path(__file__).resolve().parent / "goldens"
MODULES = {
    "params": params,
    "memory": memory,
    "activations": activations,
    "flops": flops,
    "traffic": traffic,
    "throughput": throughput,
}
SHAPE = ("arch", "vocab", "seq", "layers", "hidden", "heads", "kv_heads", "ffn")
# shapes no preset has: odd widths, layers and vocabularies, GQA, a biased Llama
ODD_MODELS = [
    dict(zip(SHAPE + ("tied", "bias"), values))
    for values in (
        ("gpt", 1001, 77, 5, 96, 3, 3, 333, False, True),
        ("llama", 32003, 129, 7, 120, 6, 3, 321, True, True),
        ("llama", 50, 3, 1, 8, 8, 1, 1, False, False),
    )
]

# mixtures of experts no preset is: GELU experts with biases, shared experts, every
# other layer MoE after a dense one, an MTP module; MLA without a q down-projection
ODD_MOE = [
    ODD_MODELS[0] | {"layers": 7, "experts": 6, "top_k": 2, "shared_experts": 1,
                     "expert_ffn": 50, "moe_every": 2, "dense_layers": 1, "mtp": 1},
    ODD_MODELS[1] | {"layers": 4, "experts": 5, "top_k": 5, "heads": 6, "kv_heads": 6,
                     "mla": {"q_rank": 0, "kv_rank": 16, "nope": 8, "rope": 4,
                             "v": 12}},
    ODD_MODELS[2] | {"experts": 1, "top_k": 1},
]  # fmt: skip


def case(module: str, name: str, *args, **kw) -> dict:
    """One call of ``module.name``. The JS port takes Python's keyword arguments as
    one object after the positional ones (``activation_bytes``' ``kw``,
    ``link``'s ``alphas``)."""
    want = getattr(MODULES[module], name)(*args, **kw)
    return {"fn": f"{module}.{name}", "args": [*args, kw] if kw else list(args)} | {
        "want": want
    }


def model_cases(model: dict) -> list[dict]:
    """Every formula that reads a model's shape, on a spread of layouts."""
    arch, V, s, L, h, a, kv, ffn = (model[k] for k in SHAPE)
    tied, bias = model["tied"], model["bias"]
    dims, layer = (arch, V, s, L, h, a, kv, ffn, tied, bias), (h, a, kv, ffn)
    total = params.total_params(*dims)
    cases = [
        case("params", "norm_params", arch, h, bias),
        case("params", "attention_params", h, a, kv, bias),
        case("params", "mlp_params", arch, h, ffn, bias),
        case("params", "total_params", *dims),
        case("params", "flop_params", arch, V, s, h, tied, total),
        case("activations", "activation_bytes", arch, s, 1, L, *layer, V, 2),
    ]
    for e in (1, 2, 4):
        cases.append(case("activations", "layer_terms", arch, *layer, e))
    for t, p in itertools.product((1, 2, 3, 8), (1, 2, 5)):
        cases += [
            case("params", "layer_params", arch, *layer, bias, t),
            case("params", "embedding_params", arch, V, s, h, t),
            case("params", "head_params", V, h, tied, t),
            case("params", "params_per_gpu", *dims, t, p),
        ]
    rng = random.Random(f"{arch}{V}{L}{h}")
    for _ in range(12):
        t, p, v, cp = (rng.choice((1, 2, 3, 4)) for _ in range(4))
        b, m, e = rng.choice((1, 2, 5)), rng.choice((1, 3, 8)), rng.choice((2, 4))
        sp, flash, halve = (rng.random() < 0.5 for _ in range(3))
        recompute = rng.choice(("none", "selective", "full"))
        s_loc, h_kv, per_stage = s / cp, kv * (h // a), L / p
        how = dict(recompute=recompute, flash=flash)
        full = params.layer_params(arch, *layer, bias)
        cases += [
            case("activations", "layer_bytes", arch, s_loc, s, b, *layer, e, t, sp,
                 recompute, flash),
            case("activations", "activation_bytes", arch, s, b, L, *layer, V, e, t,
                 sp, p, v, m, cp, **how),
            case("activations", "embedding_bytes", arch, s_loc, b, h, t, sp),
            case("activations", "head_bytes", s_loc, b, h, V, e, t, sp),
            case("flops", "attention_flops", L, h, s, halve),
            case("flops", "recompute_flops", recompute, full, L, h, s, halve),
            case("traffic", "tp_calls", b, s_loc, h, e, per_stage, m, sp, recompute),
            case("traffic", "pp_calls", b, s_loc, h, e, m, p, v, t, sp),
            case("traffic", "cp_calls", b, s_loc, h_kv, e, per_stage, m, cp, t,
                 recompute),
        ]  # fmt: skip
    return cases


def moe_cases(model: dict) -> list[dict]:
    """The MoE formulas on one model with experts, over TP, PP, VPP and EP."""
    L, h, m = model["layers"], model["hidden"], params.moe_shape(model)
    cases = [
        case("params", "moe_shape", model),
        case("params", "attention_width", model),
        case("params", "mtp_params", h, 12345.0, 3),
        case("activations", "mean_ffn", L, L // 2, model["ffn"], 3 * m["expert_ffn"]),
    ]
    if "mla" in model:
        x = model["mla"]
        shape = (x["q_rank"], x["kv_rank"], x["nope"], x["rope"], x["v"])
        cases.append(case("params", "mla_params", h, model["heads"], *shape))
    for i in range(0, L + 2, max(1, L // 9)):
        cases.append(case("params", "is_moe_layer", i, m["experts"], m["dense"],
                          m["every"]))  # fmt: skip
    for t in (1, 2, 3):
        cases.append(case("params", "moe_layer_parts", model, t))
    mine = params.moe_layer_parts(model, 2)
    for kinds in itertools.product((0, 3), (0, 2), (0, 1), (False, True)):
        cases.append(case("params", "largest_kind", mine, *kinds))
    for t, p, v, ep in itertools.product((1, 2), (1, 2, 3), (1, 2), (1, 2, 5)):
        if L % (p * v) == 0 and m["experts"] % ep == 0:
            cases.append(case("params", "moe_counts", model, t, p, v, ep))
    for b, ep, t, recompute in itertools.product(
        (1, 3), (1, 2, 8), (1, 2), ("none", "full")
    ):
        cases.append(case("traffic", "ep_calls", b, 129 / 3, h, 2, m["top_k"], L, 4,
                          ep, t, recompute))  # fmt: skip
    return cases


def formula_cases() -> list[dict]:
    cases = []
    for model in [*presets.MODELS.values(), *ODD_MODELS]:
        cases += model_cases(model)
    for model in [*presets.MODELS.values(), *ODD_MOE]:
        if model.get("experts"):
            cases += moe_cases(model)
    for L, p, v in itertools.product((1, 4, 6, 12), (1, 2, 3), (1, 2)):
        for j in range(p):
            cases.append(case("params", "stage_layers", L, p, v, j))
    for m, p, v in itertools.product((1, 2, 3, 7, 16), (1, 2, 3, 4), (1, 2, 3)):
        cases += [
            case("activations", "in_flight", m, p, v),
            case("throughput", "bubble_factor", p, m, v),
        ]
    for precision, optimizer in itertools.product(memory.PRECISIONS, ("adam", "sgd")):
        found = case("memory", "optimizer_bytes", precision, optimizer)
        cases.append(found | {"data": True})  # the JS takes the page data first
    for zero, n, psi in itertools.product(range(4), (1, 2, 3, 64), (1, 124e6, 7777)):
        cases += [
            case("memory", "model_states", psi, 2, 4, 12, zero, n),
            case("memory", "model_states", psi, 4, 2, 8, zero, n),
            case("memory", "zero3_buffer", psi / 3, 2, zero, n),
        ]
        for w, g in ((2, 4), (4, 4), (2, 2)):
            cases.append(case("traffic", "dp_calls", psi, w, g, zero, n))
    for total in (79e9, 80e9, 80e9 + 1):
        cases.append(case("memory", "fits", total, 80e9))
    cases.append(case("memory", "total_bytes", {"a": 1.5, "b": 2, "c": 1e9}))
    kinds = ("all_reduce", "all_gather", "reduce_scatter", "send", "all_to_all")
    for kind, n in itertools.product(kinds, (1, 2, 3, 8, 64)):
        cases += [
            case("traffic", "bus_factor", kind, n),
            case("traffic", "call_seconds", kind, 3e8, n, 3e-6, 450e9),
            case("traffic", "call_seconds", kind, 1001, n, 8e-6, 25e9),
        ]
    calls = [["all_reduce", 1e6, 3], ["all_gather", 777, 2], ["send", 5e5, 7]]
    for n in (1, 2, 3, 8):
        cases += [
            case("traffic", "sent_bytes", calls, n),
            case("traffic", "seconds", calls, n, 3e-6, 450e9),
            case("traffic", "sent_bytes", [], n),
        ]
    gpu = presets.GPUS["h100-sxm"]
    for span, per_node in itertools.product((1, 4, 8, 9, 64), (4, 8)):
        cases.append(case("traffic", "link", span, per_node, 450e9, 50e9, **gpu))
    for flops_, peak, eff in ((1e18, 989e12, 0.5), (3.3e15, 312e12, 1), (7, 3, 0.35)):
        cases.append(case("throughput", "compute_seconds", flops_, peak, eff))
        cases.append(case("flops", "utilization", flops_, 1e5, 8, peak))
    for compute, overlap in itertools.product((0.5, 2.0, 1e-3), (0, 0.25, 1)):
        comm = (0.7, 0.2, 0.1, 0.4)  # dp, tp, pp, cp seconds
        cases.append(case("throughput", "step_seconds", compute, 1.5, *comm, overlap))
        cases.append(
            case("throughput", "step_seconds", compute, 1.5, *comm, overlap, 0.3)
        )
    for g_batch, s, step in ((512, 2048, 3.5), (1, 1, 1), (3, 4097, 0.1)):
        cases.append(case("throughput", "tokens_per_second", g_batch, s, step))
    return cases


def rounding_cases() -> list[dict]:
    """Python's round(): ties to even, negative numbers, big counts."""
    values = [0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 2.4999, 2.5001, 3.0, 7.5e9]
    values += [124439808.0, 1e15 + 0.5, 2**52 - 0.5]
    return [{"x": x, "want": round(x)} for x in values]


def cli(argv: list[str]) -> dict:
    """``python -m snippets size ARGV --json`` in process: its object, or the one
    line it prints on stderr."""
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        try:
            code = cli_main(["size", *argv, "--json"])
        except SystemExit as exited:  # the parser's own refusals exit
            code = exited.code
    if code == 0:
        return {"argv": argv, "result": json.loads(out.getvalue()), "error": None}
    line = err.getvalue().strip()
    assert code == 2 and len(line.splitlines()) == 1, (argv, code, line)
    return {"argv": argv, "result": None, "error": line}


LAYOUTS = [  # (dp, tp, pp, vpp, cp): each alone, mixed, odd degrees
    (1, 1, 1, 1, 1), (8, 1, 1, 1, 1), (3, 1, 1, 1, 1), (1, 8, 1, 1, 1),
    (2, 4, 2, 1, 1), (4, 2, 4, 2, 1), (2, 2, 2, 1, 2), (1, 1, 3, 1, 1),
    (64, 8, 4, 1, 2), (5, 1, 1, 1, 3),
]  # fmt: skip
SWITCHES = """
--zero 1
--zero 2 --grad-bytes 2
--zero 3
--recompute selective --sequence-parallel
--recompute full --no-flash
--precision fp32 --optimizer sgd
--causal-halving --overlap 0.5 --efficiency 0.35
--intra-link pcie --gpus-per-node 4 --gpu a100-40gb
""".splitlines()  # and none: the first line is empty
OTHERS = """
--layers 5 --hidden 96 --heads 3 --vocab 1001 --seq 77 --tp 3 --dp 3 --zero 3
--layers 7 --hidden 120 --heads 6 --kv-heads 3 --ffn 333 --vocab 32003 --arch llama \
 --seq 129 --tp 3 --pp 7 --micro-batch 3 --global-batch 27
--params 7.5e9 --dp 64 --zero 2 --grad-bytes 2 --seq 2048
--params 123456789 --dp 3 --seq 5 --micro-batch 7
--preset llama3-8b --layers 16 --arch gpt --tp 4
--preset llama3-70b --tp 8 --pp 5 --dp 3 --cp 2 --sequence-parallel --recompute full \
 --zero 1 --global-batch 96
--preset gpt3-175b --tp 8 --pp 8 --vpp 3 --dp 2 --global-batch 64 --gpus 128
--preset mixtral-8x7b --seq 4096 --dp 8 --ep 8 --zero 1
--preset mixtral-8x7b --seq 4096 --dp 16 --ep 4 --tp 2 --pp 4 --vpp 2 --zero 3 \
 --global-batch 64 --sequence-parallel --recompute full
--preset mixtral-8x7b --dp 6 --ep 2 --cp 2 --top-k 3 --shared-experts 1 \
 --expert-ffn 4096 --tp 4 --sequence-parallel
--preset deepseek-v3 --dp 64 --ep 64 --zero 1
--preset deepseek-v3 --dp 32 --ep 32 --tp 2 --zero 3 --recompute selective \
 --sequence-parallel --gpus-per-node 4
--preset deepseek-v3 --layers 12 --pp 4 --vpp 3 --dp 8 --ep 8 --global-batch 32
--preset llama3-8b --experts 16 --top-k 2 --moe-every 2 --dense-layers 1 --dp 4 \
 --ep 4 --pp 2
--layers 5 --hidden 96 --heads 3 --vocab 1001 --seq 77 --experts 6 --top-k 2 \
 --expert-ffn 51 --shared-experts 2 --tp 3 --dp 3 --ep 3 --zero 2
--preset deepseek-v3 --experts 8 --top-k 8 --dp 4 --ep 2 --precision fp32
--preset llama3-8b --micro-batch 100000
--preset llama3-8b --dp 4 --zero 3 --micro-batch 64
--preset deepseek-v3 --dp 8 --ep 8 --zero 3
--params 2e10 --seq 8
--preset gpt2-124m --dp 1000000
--preset gpt2-124m --dp 1048576 --cp 1
--preset tiny-gpt --cp 16 --dp 65536
--preset gpt2-124m --efficiency 0.0001
--layers 1024 --hidden 8192 --heads 64 --vocab 50 --seq 4096 --pp 1024
--preset gpt2-124m --dp 4096 --overlap 1 --zero 3
"""  # custom shapes, odd sizes, bare counts, a preset's shape overridden; absurd
# answers that say why (memory beyond every GPU, MFU 0.0%), ZeRO-3's held count
REFUSED = """
--preset llama3-8b --tp 3
--preset gpt2-124m --dp 2 --gpus 7
--preset gpt2-124m --cp 2 --seq 1001
--preset gpt2-124m --dp 2 --global-batch 3
--preset gpt2-124m --pp 2 --vpp 3
--preset gpt2-124m --vpp 2
--preset llama3-8b --pp 2 --vpp 2 --global-batch 3
--preset gpt2-124m --layers 5 --pp 2
--preset llama3-8b --tp 2 --seq 4097 --sequence-parallel
--preset gpt2-124m --efficiency 1.5
--preset gpt2-124m --overlap 2
--preset gpt2-124m --dp 0
--preset gpt2-124m --tp 1.5
--preset gpt2-124m --tp -2
--preset gpt2-124m --efficiency nan
--preset gpt2-124m --zero 4
--preset gpt2-124m --recompute some
--preset gpt2-124m --tp
--preset gpt2-124m --bogus 1
--preset gpt-5
--preset gpt2-124m --gpu tpu
--params 7e9 --tp 2 --seq 2048
--params 7e9 --layers 4
--params 7e9
--layers 4 --hidden 64
--layers 4 --hidden 100 --heads 3 --vocab 50 --seq 8
--layers 4 --hidden 64 --heads 4 --kv-heads 3 --vocab 50 --seq 8
--preset mixtral-8x7b --top-k 0
--preset mixtral-8x7b --top-k 9
--preset mixtral-8x7b --dp 3 --ep 3
--preset mixtral-8x7b --dp 2 --ep 4
--preset mixtral-8x7b --ep 0
--preset llama3-8b --dp 2 --ep 2
--preset llama3-8b --top-k 2
--preset llama3-8b --experts 4
--preset mixtral-8x7b --shared-experts 1 --expert-ffn 100 --tp 8
--params 7e9 --seq 2048 --experts 8 --top-k 2
--params 7e9 --seq 2048 --dp 2 --ep 2
--preset mixtral-8x7b --moe-every 0
--preset mixtral-8x7b --dense-layers -1
--preset llama3-8b --dp 1000000000
--preset gpt2-124m --cp 1048577
--preset llama3-8b --dp 1024 --tp 8 --pp 256
--preset gpt2-124m --dp 1048576 --gpus 1048577
"""  # each impossible: argparse's refusals and estimate()'s


def lines(text: str) -> list[list[str]]:
    return [line.split() for line in text.strip().splitlines()]


def cli_cases() -> list[dict]:
    rng, argvs = random.Random(20260101), []
    for name, (dp, tp, pp, v, cp) in itertools.product(presets.MODELS, LAYOUTS):
        model = presets.MODELS[name]
        if model["heads"] % tp or model["kv_heads"] % tp or model["layers"] % (pp * v):
            continue
        argv = ["--preset", name]
        for flag, value in zip(
            ("--dp", "--tp", "--pp", "--vpp", "--cp"), (dp, tp, pp, v, cp)
        ):
            argv += [flag, str(value)] if value != 1 else []
        if v > 1:
            argv += ["--global-batch", str(dp * pp * 2)]
        if model["seq"] % cp:  # an odd cp: the longest context it divides
            argv += ["--seq", str(model["seq"] // cp * cp)]
        argvs.append(argv + rng.choice(SWITCHES).split())
    return [cli(argv) for argv in argvs + lines(OTHERS) + lines(REFUSED)]


def overlay_graphs() -> dict[str, dict]:
    """The graphs the notes' viewers draw: the tiny GPT (a tied head), the
    Llama-style block (grouped-query attention, a SwiGLU MLP) and the tiny GPT with
    mixtures of experts (drawn at module level: the router's branch stops tracers)."""
    from snippets.viewer.graph_export import export_graph
    from snippets.viewer.llama_block import inputs, llama_block
    from snippets.viewer.model_viewer import tiny_gpt, tiny_gpt_inputs, tiny_moe_gpt

    return {
        "tiny-gpt": parallel_overlay.annotate(
            export_graph(tiny_gpt(), tiny_gpt_inputs())
        ),
        "llama-block": parallel_overlay.annotate(export_graph(llama_block(), inputs())),
        "tiny-moe-gpt": parallel_overlay.annotate(
            export_graph(tiny_moe_gpt(), tiny_gpt_inputs())
        ),
    }


DEGREES = [  # the notes' own, each ZeRO stage, odd degrees
    Degrees(dp=2, tp=2, pp=2, cp=1, zero=1),
    Degrees(dp=2, tp=2, pp=2, zero=1, sp=True),
    Degrees(dp=2, tp=2, pp=1, cp=2, zero=3),
    Degrees(dp=1, tp=2, pp=2, cp=2, zero=2, sp=True),
    Degrees(tp=2, cp=2),
    Degrees(),
    Degrees(dp=3, zero=0),
    Degrees(dp=5, pp=3, zero=2),
    Degrees(dp=3, tp=3, pp=3, cp=3, zero=3, sp=True),
    Degrees(tp=4, pp=4, sp=True),
    Degrees(dp=2, cp=3, zero=1),
    Degrees(pp=5, tp=1, zero=0),
]
EP_DEGREES = [  # the mixture's: EP folded over DP, beside each other parallelism
    Degrees(dp=2, ep=2),
    Degrees(dp=4, tp=2, zero=1, ep=2),
    Degrees(dp=4, tp=2, zero=3, sp=True, ep=4),
    Degrees(dp=8, tp=2, pp=2, zero=2, ep=4),
    Degrees(dp=2, cp=2, zero=3, ep=2),
    Degrees(dp=6, pp=3, zero=1, ep=2),
]
REFUSED_DEGREES = [  # (graph, degrees): each refused, or "" for one that fits
    ("tiny-moe-gpt", Degrees(dp=2, ep=4)),
    ("tiny-moe-gpt", Degrees(dp=6, ep=3)),
    ("tiny-moe-gpt", Degrees(dp=3, ep=2)),
    ("tiny-moe-gpt", Degrees(dp=1, ep=2)),
    ("tiny-gpt", Degrees(dp=2, ep=2)),
    ("tiny-moe-gpt", Degrees(dp=8, ep=8)),
    ("tiny-moe-gpt", Degrees(dp=4, ep=4)),
    ("tiny-gpt", Degrees(dp=2)),
]


def jsonable(found):
    """JSON keys are strings; tuples are lists."""
    return json.loads(json.dumps(found))


def refusal(graph: dict, d: Degrees) -> str:
    """check_degrees's one line, or "" when the degrees fit."""
    try:
        parallel_overlay.check_degrees(graph, d)
    except UsageError as exc:
        return str(exc)
    return ""


def overlay_cases() -> dict:
    graphs, cases = overlay_graphs(), []
    for name, graph in graphs.items():
        for d in DEGREES + (EP_DEGREES if name == "tiny-moe-gpt" else []):
            cases.append(
                {
                    "graph": name,
                    "degrees": d.__dict__,
                    "held": [
                        [m["id"], s, psi, prec]
                        for m, s, psi, prec in overlay_bytes.held(graph, d)
                    ],
                    "collectives": overlay_bytes.collectives(graph, d),
                    "rank_bytes": overlay_bytes.rank_bytes(graph, d),
                    "dp_markers": overlay_dp.dp_markers(graph, d),
                }
            )
    stages = [
        {"args": [layer, pp, n], "want": parallel_overlay.stage(layer, pp, n)}
        for layer, pp, n in itertools.product(
            (-1, 0, 1, 2, 4, 6, 7), (1, 2, 3, 4), (0, 1, 5, 7)
        )
    ]
    ranks = [
        {"args": [s, d.__dict__], "want": parallel_overlay.ranks_of_stage(s, d)}
        for d in DEGREES
        for s in range(d.pp)
    ]
    ep_ranks = [
        {"args": [s, r, d.__dict__], "want": parallel_overlay.ranks_of_ep_rank(s, r, d)}
        for d in EP_DEGREES
        for s in range(d.pp)
        for r in range(d.ep)
    ]
    placed = [
        {"args": [i, n, ep], "want": parallel_overlay.ep_rank(i, n, ep)}
        for n, ep in ((4, 1), (4, 2), (4, 4), (6, 3), (8, 2), (256, 64))
        for i in range(n)
    ]
    checks = [
        {"graph": name, "degrees": d.__dict__, "want": refusal(graphs[name], d)}
        for name, d in REFUSED_DEGREES
    ]
    return {
        "graphs": graphs,
        "cases": cases,
        "stage": stages,
        "ranks_of_stage": ranks,
        "ranks_of_ep_rank": ep_ranks,
        "ep_rank": placed,
        "check_degrees": checks,
    }


def write(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    files = {
        "formulas.json": {
            "data": widget_data(),
            "cases": formula_cases(),
            "round": rounding_cases(),
        },
        "cli.json": {"data": widget_data(), "cases": cli_cases()},
        "overlay.json": jsonable(overlay_cases()),
    }
    for name, found in files.items():
        text = json.dumps(found, allow_nan=False, ensure_ascii=False)
        (out / name).write_text(text, encoding="utf-8")
    print(f"wrote {', '.join(files)} into {out}")


if __name__ == "__main__":
    write(Path(sys.argv[1]) if len(sys.argv) > 1 else OUT)
