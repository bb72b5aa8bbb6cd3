/* snippets/sizing/estimate.py, ported: check() with the same messages, and
   estimate(), which combines the formulas of formulas.js into the object that
   `python -m snippets size --json` prints, warnings() (what an answer cannot say
   alone) with it, in the same words. `data` is the page data that
   snippets/sizing/sizing_widget.py writes (presets, precisions, defaults). */
import {
  activations,
  flops,
  memory,
  params,
  py_round,
  throughput,
  traffic,
  UsageError,
} from "./formulas.js";

function _check(ok, message) {
  if (!ok) throw new UsageError(message);
}

// Python's f"{n:,}" of an int (a double's exact value, as int(x) gives it)
const whole = (n) => BigInt(n).toLocaleString("en-US");

function check(data, model, c) {
  for (const key of [
    "seq",
    "micro_batch",
    "global_batch",
    "dp",
    "tp",
    "pp",
    "vpp",
    "cp",
    "ep",
  ]) {
    _check(c[key] >= 1, `--${key.replaceAll("_", "-")} must be at least 1`);
  }
  _check([0, 1, 2, 3].includes(c.zero), `--zero must be 0-3, got ${c.zero}`);
  _check(0 <= c.overlap && c.overlap <= 1, "--overlap must be between 0 and 1");
  _check(0 < c.efficiency && c.efficiency <= 1, "--efficiency must be in (0, 1]");
  const [dp, tp, pp, cp, v] = ["dp", "tp", "pp", "cp", "vpp"].map((k) => c[k]);
  const MAX = data.limits.max_gpus;
  const beyond = `above ${whole(MAX)} GPUs (2^20, 64 × Llama 3 405B's 16,384): too far`;
  for (const key of ["dp", "tp", "pp", "cp"]) {
    _check(c[key] <= MAX, `--${key} is ${beyond} to model`);
  }
  const grid = dp * tp * pp * cp;
  _check(grid <= MAX, `dp·tp·pp·cp is ${beyond} to model`);
  _check(c.gpus === grid, `dp·tp·pp·cp = ${grid} but --gpus is ${c.gpus}`);
  const per_step = c.micro_batch * dp;
  _check(
    c.global_batch % per_step === 0,
    `--global-batch ${c.global_batch} is not a multiple of ` +
      `micro-batch × dp = ${per_step}`,
  );
  const E = model.experts ?? 0,
    ep = c.ep;
  _check(ep === 1 || E > 0, `--ep ${ep} needs a model with experts (--experts)`);
  if (!("layers" in model)) {
    _check(
      tp === 1 && pp === 1 && cp === 1,
      "--params has no layer shapes: tp, pp, cp need 1",
    );
    return;
  }
  if (E > 0) check_moe(model, c);
  const [L, h, a, kv] = ["layers", "hidden", "heads", "kv_heads"].map((k) => model[k]);
  for (const key of ["layers", "hidden", "heads", "kv_heads", "ffn", "vocab"]) {
    _check(model[key] >= 1, `--${key.replaceAll("_", "-")} must be at least 1`);
  }
  _check(h % a === 0, `--hidden ${h} is not divisible by --heads ${a}`);
  _check(a % kv === 0, `--heads ${a} is not divisible by --kv-heads ${kv}`);
  _check(a % tp === 0, `--heads ${a} is not divisible by --tp ${tp}`);
  _check(kv % tp === 0, `--kv-heads ${kv} is not divisible by --tp ${tp}`);
  _check(model.ffn % tp === 0, `--ffn ${model.ffn} is not divisible by --tp`);
  _check(L % (pp * v) === 0, `--layers ${L} is not divisible by pp·vpp = ${pp * v}`);
  _check(v === 1 || pp > 1, "--vpp above 1 needs --pp above 1");
  const m = Math.floor(c.global_batch / per_step);
  _check(
    v === 1 || m % pp === 0,
    `--vpp ${v} needs micro-batches (${m}) divisible by --pp ${pp}`,
  );
  _check(c.seq % cp === 0, `--seq ${c.seq} is not divisible by --cp ${cp}`);
  if (c.sequence_parallel) {
    _check(Math.floor(c.seq / cp) % tp === 0, "with SP, seq/cp must divide by --tp");
  }
}

function check_moe(model, c) {
  const m = params.moe_shape(model),
    ep = c.ep,
    dp = c.dp,
    tp = c.tp;
  const E = m.experts,
    k = m.top_k;
  _check(1 <= k && k <= E, `--top-k ${k} must be 1 to ${E} (the experts)`);
  _check(E % ep === 0, `--experts ${E} is not divisible by --ep ${ep}`);
  _check(
    dp % ep === 0,
    `--ep ${ep} does not divide --dp ${dp}: expert ` +
      "parallelism is folded inside data parallelism",
  );
  _check(m.every >= 1, "--moe-every must be at least 1");
  _check(m.dense >= 0, "--dense-layers must be at least 0");
  _check(
    m.shared === 0 || m.expert_ffn % tp === 0,
    `--expert-ffn ${m.expert_ffn} is not divisible by --tp ${tp}`,
  );
}

function moe_parts(model, c, e) {
  const [tp, pp, v, ep, s] = ["tp", "pp", "vpp", "ep", "seq"].map((k) => c[k]);
  const counts = params.moe_counts(model, tp, pp, v, ep);
  const m = params.moe_shape(model);
  const width = (m.top_k + m.shared) * m.expert_ffn;
  const ffn = activations.mean_ffn(model.layers, counts.moe_layers, model.ffn, width);
  const micro = Math.floor(c.global_batch / (c.micro_batch * c.dp));
  const calls = traffic.ep_calls(
    c.micro_batch,
    s / c.cp,
    model.hidden,
    e,
    m.top_k,
    counts.stage_moe,
    micro,
    ep,
    tp,
    c.recompute,
  );
  const b = c.micro_batch,
    h = model.hidden,
    k = m.top_k;
  const one = traffic.ep_calls(b, s / c.cp, h, e, k, 1, 1, ep, tp);
  const per_layer = traffic.sent_bytes(one, ep);
  return Object.assign(counts, { ffn: ffn, ep_calls: calls, a2a_per_layer: per_layer });
}

function step_parts(compute, bubble, comm_s, overlap) {
  const hidden = Math.min(overlap * (comm_s.dp + comm_s.cp), compute);
  const overlapped = comm_s.dp + comm_s.cp;
  const exposed = overlapped > 0 ? (overlapped - hidden) / overlapped : 0;
  return {
    compute: compute,
    bubble: compute * (bubble - 1),
    tp: comm_s.tp,
    pp: comm_s.pp,
    ep: comm_s.ep,
    dp: comm_s.dp * exposed,
    cp: comm_s.cp * exposed,
  };
}

const _gb = (x) => `${whole(py_round(x / 1e9))} GB`;
// Python's max(keys, key=...): the first of the largest
const largest = (keys, value) => keys.reduce((a, k) => (value(k) > value(a) ? k : a));

function warnings(data, r, c, gpus) {
  const found = {};
  const mem = r.memory_bytes,
    b = c.micro_batch,
    s_loc = Math.floor(c.seq / c.cp);
  const name = largest(Object.keys(gpus), (g) => gpus[g].hbm_bytes);
  const cap = gpus[name].hbm_bytes;
  if (mem.total > cap) {
    const part = largest(
      ["weights", "gradients", "optimizer", "activations", "buffers"],
      (k) => mem[k],
    );
    const why =
      part === "activations"
        ? `micro-batch ${b} × ${whole(s_loc)} tokens a GPU at once`
        : part === "buffers"
          ? "ZeRO-3's gathered layer"
          : `a shard of ${whole(py_round(r.params_per_gpu))} parameters a GPU`;
    found.memory_bytes =
      `${_gb(mem.total)} a GPU is more than any GPU preset ` +
      `holds (${name}: ${_gb(cap)}); ${_gb(mem[part])} of it is ${part}: ${why}`;
  }
  if (r.mfu < data.limits.mfu_shown) {
    const parts = step_parts(
      r.compute_seconds_per_step,
      r.bubble_factor,
      r.comm_seconds_per_step,
      c.overlap,
    );
    const part = largest(Object.keys(parts), (k) => parts[k]);
    const share = py_round((100 * parts[part]) / r.step_time_s);
    let why;
    if (part === "compute") {
      why = "compute (at the --efficiency given)";
    } else if (part === "bubble") {
      why = `the pipeline bubble (${c.pp - 1} stages idle, m = ${r.microbatches})`;
    } else {
      const ranks = part === "dp" ? c.dp * c.cp : c[part];
      why = `${part.toUpperCase()} communication over ${whole(ranks)} ranks`;
    }
    found.mfu = `MFU rounds to 0.0%: ${why} is ${share}% of the step`;
  }
  return found;
}

function _dims(model) {
  const keys = ["arch", "vocab", "seq", "layers", "hidden", "heads", "kv_heads", "ffn"];
  return keys.map((k) => model[k]).concat([model.tied, model.bias]);
}

function estimate(data, model, gpu, setup) {
  const c = Object.assign({}, data.defaults, setup);
  c.seq = c.seq || model.seq || 0;
  c.global_batch = c.global_batch || c.micro_batch * c.dp;
  c.gpus = c.gpus || c.dp * c.tp * c.pp * c.cp;
  check(data, model, c);
  const [dp, tp, pp, cp, v, s] = ["dp", "tp", "pp", "cp", "vpp", "seq"].map(
    (k) => c[k],
  );
  const b = c.micro_batch,
    zero = c.zero,
    recompute = c.recompute;
  const m = Math.floor(c.global_batch / (b * dp));
  const prec = data.precisions[c.precision];
  const w = prec.weight,
    e = data.activation_bytes[c.precision];
  const g = c.grad_bytes || prec.grad;
  const k = memory.optimizer_bytes(data, c.precision, c.optimizer);
  const sp = c.sequence_parallel && tp > 1;
  const s_loc = s / cp;
  let N, N_active, P, L, h, h_kv, h_q, layer_full, layer_tp, act, attn, extra, N_flop;
  let moe = null;
  if ("layers" in model) {
    let V, s_pos, a, kv, ffn, tied, bias, arch;
    [arch, V, s_pos, L, h, a, kv, ffn, tied, bias] = _dims(model);
    h_kv = kv * Math.floor(h / a);
    h_q = h;
    if ((model.experts ?? 0) > 0) {
      moe = moe_parts(model, c, e);
      N = moe.total;
      N_active = moe.active;
      P = moe.per_gpu;
      layer_full = moe.layer_active;
      layer_tp = moe.layer_tp;
      ffn = moe.ffn;
      N_flop = moe.flop;
      h_q = moe.h_q;
    } else {
      N = params.total_params(arch, V, s_pos, L, h, a, kv, ffn, tied, bias);
      P = params.params_per_gpu(arch, V, s_pos, L, h, a, kv, ffn, tied, bias, tp, pp);
      layer_full = params.layer_params(arch, h, a, kv, ffn, bias);
      layer_tp = params.layer_params(arch, h, a, kv, ffn, bias, tp);
      N_flop = params.flop_params(arch, V, s_pos, h, tied, N);
      N_active = N;
    }
    act = activations.activation_bytes(
      arch,
      s,
      b,
      L,
      h,
      a,
      kv,
      ffn,
      V,
      e,
      tp,
      sp,
      pp,
      v,
      m,
      cp,
      { recompute: recompute, flash: c.flash },
    );
    attn = flops.attention_flops(L, h_q, s, c.causal_halving);
    extra = flops.recompute_flops(recompute, layer_full, L, h_q, s, c.causal_halving);
  } else {
    // a bare parameter count: model states and 6N only
    N = N_active = P = model.params;
    L = h = h_kv = layer_full = layer_tp = act = attn = extra = 0;
    N_flop = N;
  }
  let states = memory.model_states(P, w, g, k, zero, dp * cp);
  let buffers = memory.zero3_buffer(layer_tp, w, zero, dp * cp);
  let P_exp = 0;
  const edp = Math.floor((dp * cp) / c.ep);
  if (moe !== null) {
    P_exp = moe.experts_per_gpu;
    const held = memory.model_states(P_exp, w, g, k, zero, edp);
    states = Object.fromEntries(
      Object.keys(states).map((key) => [key, states[key] + held[key]]),
    );
    buffers += memory.zero3_buffer(moe.layer_experts, w, zero, edp);
  }
  const mem = Object.assign(states, { activations: act, buffers: buffers });
  mem.total = memory.total_bytes(mem);
  const per_token = 6 * N_flop + attn;
  const hw_per_token = per_token + extra;
  const tokens = c.global_batch * s;
  const layers_here = L / pp;
  let tp_layers = layers_here;
  if (moe !== null) {
    const shared = params.moe_shape(model).shared;
    tp_layers = moe.stage_dense + moe.stage_moe * (shared ? 1 : 0.5);
  }
  const calls = {
    dp: traffic.dp_calls(P, w, g, zero, m),
    tp: traffic.tp_calls(b, s_loc, h, e, tp_layers, m, sp, recompute),
    pp: traffic.pp_calls(b, s_loc, h, e, m, pp, v, tp, sp),
    cp: traffic.cp_calls(b, s_loc, h_kv, e, layers_here, m, cp, tp, recompute),
    ep: moe !== null ? moe.ep_calls : [],
  };
  const sizes = { dp: dp * cp, tp: tp, pp: pp, cp: cp, ep: c.ep };
  const spans = {
    dp: tp * cp * dp,
    tp: tp,
    pp: c.gpus,
    cp: tp * cp,
    ep: tp * cp * c.ep,
  };
  const intra = c.intra_link === "nvlink" ? gpu.nvlink_bw : gpu.pcie_bw;
  const comm_bytes = {},
    comm_s = {};
  for (const [name, found] of Object.entries(calls)) {
    const [alpha, bw] = traffic.link(
      spans[name],
      c.gpus_per_node,
      intra,
      gpu.ib_bw,
      gpu,
    );
    comm_bytes[name] = traffic.sent_bytes(found, sizes[name]);
    comm_s[name] = traffic.seconds(found, sizes[name], alpha, bw);
    if (name === "dp" && P_exp > 0) {
      const experts = traffic.dp_calls(P_exp, w, g, zero, m);
      comm_bytes[name] += traffic.sent_bytes(experts, edp);
      comm_s[name] += traffic.seconds(experts, edp, alpha, bw);
    }
  }
  const compute = throughput.compute_seconds(
    (hw_per_token * tokens) / c.gpus,
    gpu.peak_flops,
    c.efficiency,
  );
  const bubble = throughput.bubble_factor(pp, m, v);
  const step = throughput.step_seconds(
    compute,
    bubble,
    comm_s.dp,
    comm_s.tp,
    comm_s.pp,
    comm_s.cp,
    c.overlap,
    comm_s.ep,
  );
  const tps = throughput.tokens_per_second(c.global_batch, s, step);
  // ZeRO-3 keeps 1/(dp·cp) of the shard between layers (its experts' 1/edp)
  const held = zero === 3 ? P / (dp * cp) + P_exp / edp : P + P_exp;
  const found = {
    params: N,
    params_active: N_active,
    params_per_gpu: P + P_exp,
    params_held_per_gpu: held,
    expert_params_per_gpu: P_exp,
    all_to_all_bytes_per_moe_layer: moe !== null ? moe.a2a_per_layer : 0.0,
    memory_bytes: mem,
    memory_capacity_bytes: gpu.hbm_bytes,
    fits: memory.fits(mem.total, gpu.hbm_bytes),
    flops_per_token: per_token,
    hardware_flops_per_token: hw_per_token,
    comm_bytes_per_step: comm_bytes,
    comm_seconds_per_step: comm_s,
    compute_seconds_per_step: compute,
    bubble_factor: bubble,
    microbatches: m,
    step_time_s: step,
    tokens_per_s: tps,
    mfu: flops.utilization(per_token, tps, c.gpus, gpu.peak_flops),
    hfu: flops.utilization(hw_per_token, tps, c.gpus, gpu.peak_flops),
    inputs: Object.assign(
      { model: Object.assign({}, model), gpu: Object.assign({}, gpu) },
      c,
    ),
  };
  found.warnings = warnings(data, found, c, data.gpus);
  return found;
}

export { check, estimate, step_parts, warnings };
