"""One configuration in, every number of the calculator out: the ``--json`` object.

``estimate(model, gpu, **setup)`` checks the configuration (a
:class:`~snippets.core.errors.UsageError` names the first impossible input) and
combines the formula modules: params, memory, activations, flops, traffic, throughput.
``model`` and ``gpu`` are dicts shaped like the presets' entries; ``model`` may carry
``params`` alone (a bare count: no layer shapes, so no activations, attention FLOPs,
TP, PP or CP). The keys of ``setup`` and their defaults are :data:`DEFAULTS`.

A model with experts (``params.moe_shape``) takes :func:`moe_parts`: its active
parameters drive 6N, its routed experts are split over ``ep`` ranks and their model
states sharded over the dp·cp/ep ranks that hold the same experts (ZeRO's group for
the rest is dp·cp), their gradients reduced over that group (counted under ``dp``),
and the all-to-alls of ``traffic.ep_calls`` are ``comm_bytes_per_step["ep"]``.

Plausibility. A grid above :data:`MAX_GPUS` is refused (:func:`check`): the α-β
model has no data that far, and the page's port keeps every integer exact below it.
Where a configuration computes but an answer says nothing on its own,
:func:`warnings` says why, keyed by the field it explains: a GPU's memory beyond
every GPU in the presets (which part, and what makes it), and an MFU that rounds
to 0.0% (what takes the step instead). Both are in the ``--json`` object.
"""

from __future__ import annotations

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

DEFAULTS = dict(
    seq=None,  # tokens a sequence (default: the model's training context)
    micro_batch=1,  # b: sequences a GPU runs at once
    global_batch=None,  # B: sequences a step (default: micro_batch × dp, m = 1)
    dp=1,
    tp=1,
    pp=1,
    vpp=1,  # v: interleaved chunks a pipeline stage
    cp=1,
    ep=1,  # expert-parallel ranks, folded inside dp (params.py's conventions)
    zero=0,
    sequence_parallel=False,
    recompute="none",  # none | selective | full
    flash=True,  # FlashAttention: no s² scores kept
    precision="bf16-mixed",  # bf16-mixed | fp32
    optimizer="adam",  # adam | sgd
    grad_bytes=None,  # default: the precision's (4); 2 is the ZeRO paper's 16 B
    gpus=None,  # default: dp × tp × pp × cp
    gpus_per_node=8,
    intra_link="nvlink",  # nvlink | pcie
    efficiency=0.5,  # fraction of dense peak the compute reaches
    overlap=0.0,  # fraction of DP and CP time hidden behind compute
    causal_halving=False,  # Megatron's ÷2 of the attention FLOPs
)


# 2^20 GPUs: 64 × the 16,384 H100s that trained Llama 3 405B (Llama 3 paper, §3.3).
MAX_GPUS = 2**20
MFU_SHOWN = 0.0005  # below it, MFU prints as 0.0%


def _check(ok: bool, message: str) -> None:
    if not ok:
        raise UsageError(message)


def check(model: dict, c: dict) -> None:
    """Refuse what cannot run; each message names the inputs."""
    keys = ("seq", "micro_batch", "global_batch", "dp", "tp", "pp", "vpp", "cp", "ep")
    for key in keys:
        _check(c[key] >= 1, f"--{key.replace('_', '-')} must be at least 1")
    _check(c["zero"] in (0, 1, 2, 3), f"--zero must be 0-3, got {c['zero']}")
    _check(0 <= c["overlap"] <= 1, "--overlap must be between 0 and 1")
    _check(0 < c["efficiency"] <= 1, "--efficiency must be in (0, 1]")
    dp, tp, pp, cp, v = (c[k] for k in ("dp", "tp", "pp", "cp", "vpp"))
    beyond = f"above {MAX_GPUS:,} GPUs (2^20, 64 × Llama 3 405B's 16,384): too far"
    for key in ("dp", "tp", "pp", "cp"):
        _check(c[key] <= MAX_GPUS, f"--{key} is {beyond} to model")
    grid = dp * tp * pp * cp
    _check(grid <= MAX_GPUS, f"dp·tp·pp·cp is {beyond} to model")
    _check(c["gpus"] == grid, f"dp·tp·pp·cp = {grid} but --gpus is {c['gpus']}")
    per_step = c["micro_batch"] * dp
    _check(
        c["global_batch"] % per_step == 0,
        f"--global-batch {c['global_batch']} is not a multiple of "
        f"micro-batch × dp = {per_step}",
    )
    E, ep = model.get("experts", 0), c["ep"]
    _check(ep == 1 or E > 0, f"--ep {ep} needs a model with experts (--experts)")
    if "layers" not in model:
        _check(tp == pp == cp == 1, "--params has no layer shapes: tp, pp, cp need 1")
        return
    if E > 0:
        check_moe(model, c)
    L, h, a, kv = (model[k] for k in ("layers", "hidden", "heads", "kv_heads"))
    for key in ("layers", "hidden", "heads", "kv_heads", "ffn", "vocab"):
        _check(model[key] >= 1, f"--{key.replace('_', '-')} must be at least 1")
    _check(h % a == 0, f"--hidden {h} is not divisible by --heads {a}")
    _check(a % kv == 0, f"--heads {a} is not divisible by --kv-heads {kv}")
    _check(a % tp == 0, f"--heads {a} is not divisible by --tp {tp}")
    _check(kv % tp == 0, f"--kv-heads {kv} is not divisible by --tp {tp}")
    _check(model["ffn"] % tp == 0, f"--ffn {model['ffn']} is not divisible by --tp")
    _check(L % (pp * v) == 0, f"--layers {L} is not divisible by pp·vpp = {pp * v}")
    _check(v == 1 or pp > 1, "--vpp above 1 needs --pp above 1")
    m = c["global_batch"] // per_step
    _check(
        v == 1 or m % pp == 0,
        f"--vpp {v} needs micro-batches ({m}) divisible by --pp {pp}",
    )
    _check(c["seq"] % cp == 0, f"--seq {c['seq']} is not divisible by --cp {cp}")
    if c["sequence_parallel"]:
        _check((c["seq"] // cp) % tp == 0, "with SP, seq/cp must divide by --tp")


def check_moe(model: dict, c: dict) -> None:
    m, ep, dp, tp = params.moe_shape(model), c["ep"], c["dp"], c["tp"]
    E, k = m["experts"], m["top_k"]
    _check(1 <= k <= E, f"--top-k {k} must be 1 to {E} (the experts)")
    _check(E % ep == 0, f"--experts {E} is not divisible by --ep {ep}")
    _check(
        dp % ep == 0,
        f"--ep {ep} does not divide --dp {dp}: expert parallelism is folded "
        "inside data parallelism",
    )
    _check(m["every"] >= 1, "--moe-every must be at least 1")
    _check(m["dense"] >= 0, "--dense-layers must be at least 0")
    _check(
        m["shared"] == 0 or m["expert_ffn"] % tp == 0,
        f"--expert-ffn {m['expert_ffn']} is not divisible by --tp {tp}",
    )


def moe_parts(model: dict, c: dict, e: float) -> dict:
    """The estimate's MoE numbers: counts (params.moe_counts), the mean MLP width
    the activations see, and the all-to-all calls of the most loaded GPU's stage."""
    tp, pp, v, ep, s = (c[k] for k in ("tp", "pp", "vpp", "ep", "seq"))
    counts = params.moe_counts(model, tp, pp, v, ep)
    m = params.moe_shape(model)
    width = (m["top_k"] + m["shared"]) * m["expert_ffn"]
    ffn = activations.mean_ffn(
        model["layers"], counts["moe_layers"], model["ffn"], width
    )
    micro = c["global_batch"] // (c["micro_batch"] * c["dp"])
    calls = traffic.ep_calls(
        c["micro_batch"], s / c["cp"], model["hidden"], e, m["top_k"],
        counts["stage_moe"], micro, ep, tp, c["recompute"],
    )  # fmt: skip
    b, h, k = c["micro_batch"], model["hidden"], m["top_k"]
    one = traffic.ep_calls(b, s / c["cp"], h, e, k, 1, 1, ep, tp)  # fwd + bwd
    per_layer = traffic.sent_bytes(one, ep)
    return counts | {"ffn": ffn, "ep_calls": calls, "a2a_per_layer": per_layer}


def step_parts(
    compute: float, bubble: float, comm_s: dict, overlap: float
) -> dict[str, float]:
    """``throughput.step_seconds`` term by term: compute, the pipeline bubble, each
    parallelism's communication (DP's and CP's less what the overlap hides)."""
    hidden = min(overlap * (comm_s["dp"] + comm_s["cp"]), compute)
    overlapped = comm_s["dp"] + comm_s["cp"]
    exposed = (overlapped - hidden) / overlapped if overlapped > 0 else 0
    return {
        "compute": compute,
        "bubble": compute * (bubble - 1),
        "tp": comm_s["tp"],
        "pp": comm_s["pp"],
        "ep": comm_s["ep"],
        "dp": comm_s["dp"] * exposed,
        "cp": comm_s["cp"] * exposed,
    }


def _gb(x: float) -> str:  # whole GB: prints the same in Python and in the page
    return f"{round(x / 1e9):,} GB"


def warnings(r: dict, c: dict, gpus: dict) -> dict[str, str]:
    """What a computed answer cannot say on its own, keyed by the field it explains.

    ``memory_bytes``: more than every GPU in ``gpus`` holds; no GPU choice rescues it,
    so it names the biggest part and what makes it. ``mfu``: below
    :data:`MFU_SHOWN` it prints as 0.0%; it names the biggest term of the step."""
    found = {}
    mem, b, s_loc = r["memory_bytes"], c["micro_batch"], c["seq"] // c["cp"]
    name, cap = max(
        ((g, spec["hbm_bytes"]) for g, spec in gpus.items()), key=lambda x: x[1]
    )
    if mem["total"] > cap:
        keys = ("weights", "gradients", "optimizer", "activations", "buffers")
        part = max(keys, key=lambda k: mem[k])
        if part == "activations":
            why = f"micro-batch {b} × {s_loc:,} tokens a GPU at once"
        elif part == "buffers":
            why = "ZeRO-3's gathered layer"
        else:
            why = f"a shard of {round(r['params_per_gpu']):,} parameters a GPU"
        found["memory_bytes"] = (
            f"{_gb(mem['total'])} a GPU is more than any GPU preset holds ({name}: "
            f"{_gb(cap)}); {_gb(mem[part])} of it is {part}: {why}"
        )
    if r["mfu"] < MFU_SHOWN:
        parts = step_parts(
            r["compute_seconds_per_step"], r["bubble_factor"],
            r["comm_seconds_per_step"], c["overlap"],
        )  # fmt: skip
        part = max(parts, key=lambda k: parts[k])
        share = round(100 * parts[part] / r["step_time_s"])
        if part == "compute":
            why = "compute (at the --efficiency given)"
        elif part == "bubble":
            m = r["microbatches"]
            why = f"the pipeline bubble ({c['pp'] - 1} stages idle, m = {m})"
        else:
            ranks = c["dp"] * c["cp"] if part == "dp" else c[part]
            why = f"{part.upper()} communication over {ranks:,} ranks"
        found["mfu"] = f"MFU rounds to 0.0%: {why} is {share}% of the step"
    return found


def _dims(model: dict) -> tuple:
    keys = ("arch", "vocab", "seq", "layers", "hidden", "heads", "kv_heads", "ffn")
    return tuple(model[k] for k in keys) + (model["tied"], model["bias"])


def estimate(model: dict, gpu: dict, **setup) -> dict:
    c = DEFAULTS | setup
    c["seq"] = c["seq"] or model.get("seq") or 0
    c["global_batch"] = c["global_batch"] or c["micro_batch"] * c["dp"]
    c["gpus"] = c["gpus"] or c["dp"] * c["tp"] * c["pp"] * c["cp"]
    check(model, c)
    dp, tp, pp, cp, v, s = (c[k] for k in ("dp", "tp", "pp", "cp", "vpp", "seq"))
    b, zero, recompute = c["micro_batch"], c["zero"], c["recompute"]
    m = c["global_batch"] // (b * dp)  # micro-batches a step
    prec = memory.PRECISIONS[c["precision"]]
    w, e = prec["weight"], memory.ACTIVATION_BYTES[c["precision"]]
    g = c["grad_bytes"] or prec["grad"]
    k = memory.optimizer_bytes(c["precision"], c["optimizer"])
    sp = c["sequence_parallel"] and tp > 1
    s_loc = s / cp
    moe = None
    if "layers" in model:
        arch, V, s_pos, L, h, a, kv, ffn, tied, bias = _dims(model)
        h_kv, h_q = kv * (h // a), h
        if model.get("experts", 0) > 0:
            moe = moe_parts(model, c, e)
            N, N_active, P = moe["total"], moe["active"], moe["per_gpu"]
            layer_full, layer_tp, ffn = moe["layer_active"], moe["layer_tp"], moe["ffn"]
            N_flop, h_q = moe["flop"], moe["h_q"]
        else:
            N = params.total_params(arch, V, s_pos, L, h, a, kv, ffn, tied, bias)
            P = params.params_per_gpu(
                arch, V, s_pos, L, h, a, kv, ffn, tied, bias, tp, pp
            )
            layer_full = params.layer_params(arch, h, a, kv, ffn, bias)
            layer_tp = params.layer_params(arch, h, a, kv, ffn, bias, tp)
            N_flop, N_active = params.flop_params(arch, V, s_pos, h, tied, N), N
        act = activations.activation_bytes(
            arch, s, b, L, h, a, kv, ffn, V, e, tp, sp, pp, v, m, cp,
            recompute=recompute, flash=c["flash"],
        )  # fmt: skip
        attn = flops.attention_flops(L, h_q, s, c["causal_halving"])
        extra = flops.recompute_flops(
            recompute, layer_full, L, h_q, s, c["causal_halving"]
        )
    else:  # a bare parameter count: model states and 6N only
        N = N_active = P = model["params"]
        L = h = h_kv = layer_full = layer_tp = act = attn = extra = 0
        N_flop = N
    states = memory.model_states(P, w, g, k, zero, dp * cp)
    buffers = memory.zero3_buffer(layer_tp, w, zero, dp * cp)
    P_exp, edp = 0, dp * cp // c["ep"]  # experts: sharded over dp·cp/ep ranks
    if moe is not None:
        P_exp = moe["experts_per_gpu"]
        held = memory.model_states(P_exp, w, g, k, zero, edp)
        states = {key: states[key] + held[key] for key in states}
        buffers += memory.zero3_buffer(moe["layer_experts"], w, zero, edp)
    mem = states | {"activations": act, "buffers": buffers}
    mem["total"] = memory.total_bytes(mem)
    per_token = 6 * N_flop + attn
    hw_per_token = per_token + extra
    tokens = c["global_batch"] * s
    layers_here = L / pp
    tp_layers = layers_here  # TP collectives: two a dense layer, one an MoE layer's
    if moe is not None:  # attention (and a second for TP-split shared experts)
        shared = params.moe_shape(model)["shared"]
        tp_layers = moe["stage_dense"] + moe["stage_moe"] * (1 if shared else 0.5)
    calls = {
        "dp": traffic.dp_calls(P, w, g, zero, m),
        "tp": traffic.tp_calls(b, s_loc, h, e, tp_layers, m, sp, recompute),
        "pp": traffic.pp_calls(b, s_loc, h, e, m, pp, v, tp, sp),
        "cp": traffic.cp_calls(b, s_loc, h_kv, e, layers_here, m, cp, tp, recompute),
        "ep": moe["ep_calls"] if moe is not None else [],
    }
    sizes = {"dp": dp * cp, "tp": tp, "pp": pp, "cp": cp, "ep": c["ep"]}
    spans = {"dp": tp * cp * dp, "tp": tp, "pp": c["gpus"], "cp": tp * cp}
    spans["ep"] = tp * cp * c["ep"]  # ep of the dp ranks, the nearest ones
    intra = gpu["nvlink_bw"] if c["intra_link"] == "nvlink" else gpu["pcie_bw"]
    comm_bytes, comm_s = {}, {}
    for name, found in calls.items():
        alpha, bw = traffic.link(
            spans[name], c["gpus_per_node"], intra, gpu["ib_bw"], **gpu
        )
        comm_bytes[name] = traffic.sent_bytes(found, sizes[name])
        comm_s[name] = traffic.seconds(found, sizes[name], alpha, bw)
        if name == "dp" and P_exp > 0:  # the experts' gradients, over their group
            found = traffic.dp_calls(P_exp, w, g, zero, m)
            comm_bytes[name] += traffic.sent_bytes(found, edp)
            comm_s[name] += traffic.seconds(found, edp, alpha, bw)
    compute = throughput.compute_seconds(
        hw_per_token * tokens / c["gpus"], gpu["peak_flops"], c["efficiency"]
    )
    bubble = throughput.bubble_factor(pp, m, v)
    step = throughput.step_seconds(compute, bubble, **comm_s, overlap=c["overlap"])
    tps = throughput.tokens_per_second(c["global_batch"], s, step)
    # ZeRO-3 keeps 1/(dp·cp) of the shard between layers (its experts' 1/edp)
    held = P / (dp * cp) + P_exp / edp if zero == 3 else P + P_exp
    found = {
        "params": N,
        "params_active": N_active,
        "params_per_gpu": P + P_exp,
        "params_held_per_gpu": held,
        "expert_params_per_gpu": P_exp,
        "all_to_all_bytes_per_moe_layer": moe["a2a_per_layer"] if moe else 0.0,
        "memory_bytes": mem,
        "memory_capacity_bytes": gpu["hbm_bytes"],
        "fits": memory.fits(mem["total"], gpu["hbm_bytes"]),
        "flops_per_token": per_token,
        "hardware_flops_per_token": hw_per_token,
        "comm_bytes_per_step": comm_bytes,
        "comm_seconds_per_step": comm_s,
        "compute_seconds_per_step": compute,
        "bubble_factor": bubble,
        "microbatches": m,
        "step_time_s": step,
        "tokens_per_s": tps,
        "mfu": flops.utilization(per_token, tps, c["gpus"], gpu["peak_flops"]),
        "hfu": flops.utilization(hw_per_token, tps, c["gpus"], gpu["peak_flops"]),
        "inputs": {"model": dict(model), "gpu": dict(gpu)} | c,
    }
    return found | {"warnings": warnings(found, c, presets.GPUS)}
