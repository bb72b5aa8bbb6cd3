"""The sizing calculator's output for people: short tables, lines of 88 columns at
most, the same numbers as ``--json`` rounded for reading."""

from __future__ import annotations

import textwrap

from snippets.sizing import presets


def gb(x: float) -> str:
    return f"{x / 1e9:,.2f} GB"


def _rows(rows: list[tuple[str, str]]) -> list[str]:
    width = max(len(k) for k, _ in rows)
    return [f"  {k.ljust(width)}  {v}" for k, v in rows]


def describe(inputs: dict) -> str:
    model = inputs["model"]
    name = inputs.get("preset") or (
        f"{model['arch']} L={model['layers']} h={model['hidden']}"
        if "layers" in model
        else "a bare count"
    )
    keys = ("dp", "tp", "pp", "vpp", "cp") + (("ep",) if inputs["ep"] > 1 else ())
    grid = "  ".join(f"{k}={inputs[k]}" for k in keys)
    parts = [
        f"{name} on {inputs['gpus']} × {inputs.get('gpu_name', 'gpu')}",
        f"{grid}  ZeRO-{inputs['zero']}",
        f"s={inputs['seq']} b={inputs['micro_batch']} B={inputs['global_batch']}",
    ]
    line = ",  ".join(parts)
    return line if len(line) <= 88 else ",  ".join(parts[:2]) + "\n  " + parts[2]


def table(r: dict) -> str:
    """The result of :func:`snippets.sizing.estimate.estimate` as text."""
    i, mem = r["inputs"], r["memory_bytes"]
    flags = [
        f"recompute {i['recompute']}",
        "flash" if i["flash"] else "no flash",
        "SP" if i["sequence_parallel"] else "no SP",
        i["precision"],
        i["optimizer"],
    ]
    lines = [describe(i), "  " + ", ".join(flags), ""]
    lines.append(f"parameters: {r['params']:,} in all")
    held = f"{r['params_held_per_gpu']:,.0f} held under ZeRO-3"
    lines.append(
        f"  {r['params_per_gpu']:,.0f} in a GPU's TP×PP shard"
        + (f", {held}" if i["zero"] == 3 else "")
    )
    if r["expert_params_per_gpu"]:
        m = i["model"]
        lines.append(
            f"  MoE, {m['experts']} experts, top-{m['top_k']}: "
            f"{r['params_active']:,} active a token"
        )
        lines.append(
            f"  {r['expert_params_per_gpu']:,.0f} of the shard are routed experts "
            f"(E/ep = {m['experts'] // i['ep']} a layer)"
        )
        lines.append(
            f"  all-to-all: {gb(r['all_to_all_bytes_per_moe_layer'])} a MoE layer "
            "a micro-batch, fwd + bwd"
        )
    lines.append("memory on the most loaded GPU:")
    keys = ("weights", "gradients", "optimizer", "activations", "buffers", "total")
    lines += _rows([(k, gb(mem[k])) for k in keys])
    verdict = "fits" if r["fits"] else "does NOT fit"
    lines.append(f"  {verdict} in {gb(r['memory_capacity_bytes'])}")
    lines.append(
        f"FLOPs a token: {r['flops_per_token']:.4g} model, "
        f"{r['hardware_flops_per_token']:.4g} with recompute"
    )
    lines.append("a step, per GPU:")
    comm = [
        (k, f"{gb(r['comm_bytes_per_step'][k])} sent, "
            f"{r['comm_seconds_per_step'][k]:.4g} s")
        for k in ("dp", "tp", "pp", "cp", "ep")
    ]  # fmt: skip
    lines += _rows([("compute", f"{r['compute_seconds_per_step']:.4g} s")] + comm)
    lines.append(
        f"  bubble ×{r['bubble_factor']:.3f} (m = {r['microbatches']}), "
        f"overlap {i['overlap']:g} of dp+cp"
    )
    lines.append(
        f"step {r['step_time_s']:.4g} s, {r['tokens_per_s']:,.0f} tokens/s, "
        f"MFU {r['mfu']:.1%}, HFU {r['hfu']:.1%} "
        f"(compute at {i['efficiency']:.0%} of peak)"
    )
    for message in r["warnings"].values():  # what an answer cannot say on its own
        lines += textwrap.wrap(message, 88, initial_indent="! ", subsequent_indent="  ")
    return "\n".join(lines)


def presets_table() -> str:
    """Every model and GPU preset, one line each."""
    lines = ["models:"]
    for name, m in presets.MODELS.items():
        shape = f"L={m['layers']} h={m['hidden']} a={m['heads']} kv={m['kv_heads']}"
        rest = f"ffn={m['ffn']} V={m['vocab']} s={m['seq']}"
        moe = f" E={m['experts']} k={m['top_k']}" if m.get("experts") else ""
        lines.append(f"  {name:<14} {m['arch']:<6} {shape} {rest}{moe}")
    lines.append("GPUs (dense BF16, HBM, NVLink / PCIe / IB per direction):")
    for name, g in presets.GPUS.items():
        links = "/".join(f"{g[k] / 1e9:g}" for k in ("nvlink_bw", "pcie_bw", "ib_bw"))
        lines.append(
            f"  {name:<10} {g['peak_flops'] / 1e12:>5g} TFLOP/s  "
            f"{g['hbm_bytes'] / 1e9:g} GB  {g['hbm_bw'] / 1e9:g} GB/s  {links} GB/s"
        )
    return "\n".join(lines)
