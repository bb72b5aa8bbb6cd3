/* snippets/sizing/estimate.py, ported: check() with the same messages, and
   estimate(), which combines the formulas of formulas.js into the object that
   `python -m snippets size --json` prints. `data` is the page data that
   snippets/sizing/sizing_widget.py writes (presets, precisions, defaults). */
(function () {
  "use strict";
  const F = window.CPSizingFormulas;
  const { params, memory, activations, flops, traffic, throughput } = F;

  function _check(ok, message) {
    if (!ok) throw new F.UsageError(message);
  }

  function check(model, c) {
    for (const key of ["seq", "micro_batch", "global_batch", "dp", "tp", "pp", "vpp",
      "cp"]) {
      _check(c[key] >= 1, `--${key.replaceAll("_", "-")} must be at least 1`);
    }
    _check([0, 1, 2, 3].includes(c.zero), `--zero must be 0-3, got ${c.zero}`);
    _check(0 <= c.overlap && c.overlap <= 1, "--overlap must be between 0 and 1");
    _check(0 < c.efficiency && c.efficiency <= 1, "--efficiency must be in (0, 1]");
    const [dp, tp, pp, cp, v] = ["dp", "tp", "pp", "cp", "vpp"].map((k) => c[k]);
    const grid = dp * tp * pp * cp;
    _check(c.gpus === grid, `dp·tp·pp·cp = ${grid} but --gpus is ${c.gpus}`);
    const per_step = c.micro_batch * dp;
    _check(c.global_batch % per_step === 0,
      `--global-batch ${c.global_batch} is not a multiple of ` +
      `micro-batch × dp = ${per_step}`);
    if (!("layers" in model)) {
      _check(tp === 1 && pp === 1 && cp === 1,
        "--params has no layer shapes: tp, pp, cp need 1");
      return;
    }
    const [L, h, a, kv] = ["layers", "hidden", "heads", "kv_heads"].map(
      (k) => model[k]);
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
    _check(v === 1 || m % pp === 0, `interleaving needs micro-batches (${m}) ÷ pp`);
    _check(c.seq % cp === 0, `--seq ${c.seq} is not divisible by --cp ${cp}`);
    if (c.sequence_parallel) {
      _check(Math.floor(c.seq / cp) % tp === 0, "with SP, seq/cp must divide by --tp");
    }
  }

  function _dims(model) {
    const keys = ["arch", "vocab", "seq", "layers", "hidden", "heads", "kv_heads",
      "ffn"];
    return keys.map((k) => model[k]).concat([model.tied, model.bias]);
  }

  function estimate(data, model, gpu, setup) {
    const c = Object.assign({}, data.defaults, setup);
    c.seq = c.seq || model.seq || 0;
    c.global_batch = c.global_batch || c.micro_batch * c.dp;
    c.gpus = c.gpus || c.dp * c.tp * c.pp * c.cp;
    check(model, c);
    const [dp, tp, pp, cp, v, s] = ["dp", "tp", "pp", "cp", "vpp", "seq"].map(
      (k) => c[k]);
    const b = c.micro_batch, zero = c.zero, recompute = c.recompute;
    const m = Math.floor(c.global_batch / (b * dp));
    const prec = data.precisions[c.precision];
    const w = prec.weight, e = data.activation_bytes[c.precision];
    const g = c.grad_bytes || prec.grad;
    const k = memory.optimizer_bytes(data, c.precision, c.optimizer);
    const sp = c.sequence_parallel && tp > 1;
    const s_loc = s / cp;
    let N, P, L, h, h_kv, layer_full, layer_tp, act, attn, extra, N_flop;
    if ("layers" in model) {
      let V, s_pos, a, kv, ffn, tied, bias, arch;
      [arch, V, s_pos, L, h, a, kv, ffn, tied, bias] = _dims(model);
      N = params.total_params(arch, V, s_pos, L, h, a, kv, ffn, tied, bias);
      P = params.params_per_gpu(arch, V, s_pos, L, h, a, kv, ffn, tied, bias, tp, pp);
      layer_full = params.layer_params(arch, h, a, kv, ffn, bias);
      layer_tp = params.layer_params(arch, h, a, kv, ffn, bias, tp);
      act = activations.activation_bytes(arch, s, b, L, h, a, kv, ffn, V, e, tp, sp, pp,
        v, m, cp, { recompute: recompute, flash: c.flash });
      N_flop = params.flop_params(arch, V, s_pos, h, tied, N);
      attn = flops.attention_flops(L, h, s, c.causal_halving);
      extra = flops.recompute_flops(recompute, layer_full, L, h, s, c.causal_halving);
      h_kv = kv * Math.floor(h / a);
    } else { // a bare parameter count: model states and 6N only
      N = P = model.params;
      L = h = h_kv = layer_full = layer_tp = act = attn = extra = 0;
      N_flop = N;
    }
    const states = memory.model_states(P, w, g, k, zero, dp * cp);
    const mem = Object.assign(states, {
      activations: act,
      buffers: memory.zero3_buffer(layer_tp, w, zero, dp * cp),
    });
    mem.total = memory.total_bytes(mem);
    const per_token = 6 * N_flop + attn;
    const hw_per_token = per_token + extra;
    const tokens = c.global_batch * s;
    const layers_here = L / pp;
    const calls = {
      dp: traffic.dp_calls(P, w, g, zero, m),
      tp: traffic.tp_calls(b, s_loc, h, e, layers_here, m, sp, recompute),
      pp: traffic.pp_calls(b, s_loc, h, e, m, pp, v, tp, sp),
      cp: traffic.cp_calls(b, s_loc, h_kv, e, layers_here, m, cp, tp, recompute),
    };
    const sizes = { dp: dp * cp, tp: tp, pp: pp, cp: cp };
    const spans = { dp: tp * cp * dp, tp: tp, pp: c.gpus, cp: tp * cp };
    const intra = c.intra_link === "nvlink" ? gpu.nvlink_bw : gpu.pcie_bw;
    const comm_bytes = {}, comm_s = {};
    for (const [name, found] of Object.entries(calls)) {
      const [alpha, bw] = traffic.link(spans[name], c.gpus_per_node, intra, gpu.ib_bw,
        gpu);
      comm_bytes[name] = traffic.sent_bytes(found, sizes[name]);
      comm_s[name] = traffic.seconds(found, sizes[name], alpha, bw);
    }
    const compute = throughput.compute_seconds(hw_per_token * tokens / c.gpus,
      gpu.peak_flops, c.efficiency);
    const bubble = throughput.bubble_factor(pp, m, v);
    const step = throughput.step_seconds(compute, bubble, comm_s.dp, comm_s.tp,
      comm_s.pp, comm_s.cp, c.overlap);
    const tps = throughput.tokens_per_second(c.global_batch, s, step);
    return {
      params: N,
      params_per_gpu: P,
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
      inputs: Object.assign({ model: Object.assign({}, model),
        gpu: Object.assign({}, gpu) }, c),
    };
  }

  Object.assign(F, { check, estimate });
})();
