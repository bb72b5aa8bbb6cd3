/* The sizing calculator's formulas, ported from snippets/sizing/*.py line by line:
   the same function names, the same arguments in the same order, the same order of
   operations, so a double comes out as Python's does. Python's `a / b` is `a / b`
   here, `a // b` is Math.floor(a / b) (positive integers only), `x if c else y` is
   `c ? x : y`, `sum()` adds from 0 left to right, and `round()` rounds half to even.
   The data (presets, bytes per precision, defaults) is not in this file: it comes
   from snippets/sizing/sizing_widget.py through the page (estimate.js's
   estimate() takes it as `data`). tests/js/ holds each function equal to Python's on
   every `make test`; tests/site/test_sizing_browser.py holds the page equal to
   Python's estimate() on random configurations. */

class UsageError extends Error {}

function py_round(x) {
  // Python's round(x) of a float: ties to even
  const r = Math.round(x);
  return Math.abs(x % 1) === 0.5 && r % 2 !== 0 ? r - 1 : r;
}
const sum = (values) => values.reduce((acc, v) => acc + v, 0);

// snippets/sizing/cost_formulas.py: Machine, Cost and the three ring costs
function Machine(alpha, beta, gamma = 0.0) {
  return { alpha, beta, gamma };
}
class Cost {
  constructor(alpha, beta, gamma) {
    Object.assign(this, { alpha, beta, gamma });
  }
  time(n_bytes, m) {
    return this.alpha * m.alpha + n_bytes * (this.beta * m.beta + this.gamma * m.gamma);
  }
}
const ring_cost = (p) => new Cost(2 * (p - 1), (2 * (p - 1)) / p, (p - 1) / p);
const ring_all_gather_cost = (p) => new Cost(p - 1, (p - 1) / p, 0);
const ring_reduce_scatter_cost = (p) => new Cost(p - 1, (p - 1) / p, (p - 1) / p);

// snippets/sizing/zero_memory.py
function model_state_bytes(stage, psi, N, p, g, K) {
  const params = (p * psi) / (stage >= 3 ? N : 1);
  const grads = (g * psi) / (stage >= 2 ? N : 1);
  const optimizer = (K * psi) / (stage >= 1 ? N : 1);
  return {
    parameters: params,
    gradients: grads,
    optimizer: optimizer,
    total: params + grads + optimizer,
  };
}

// snippets/sizing/params.py
const params = {
  norm_params(arch, h, bias) {
    return h * (arch === "gpt" && bias ? 2 : 1);
  },
  attention_params(h, a, kv, bias) {
    const d = Math.floor(h / a);
    const weights = h * a * d + 2 * h * kv * d + a * d * h;
    return [weights + bias * (a * d + 2 * kv * d), bias * h];
  },
  mlp_params(arch, h, ffn, bias) {
    const ins = arch === "gpt" ? 1 : 2;
    return [(ins + 1) * h * ffn + bias * ins * ffn, bias * h];
  },
  layer_params(arch, h, a, kv, ffn, bias, t = 1) {
    const [attn_split, attn_rep] = params.attention_params(h, a, kv, bias);
    const [mlp_split, mlp_rep] = params.mlp_params(arch, h, ffn, bias);
    const replicated = 2 * params.norm_params(arch, h, bias) + attn_rep + mlp_rep;
    return (attn_split + mlp_split) / t + replicated;
  },
  embedding_params(arch, V, s, h, t = 1) {
    return (V * h) / t + (arch === "gpt" ? s * h : 0);
  },
  head_params(V, h, tied, t = 1) {
    return tied ? 0 : (V * h) / t;
  },
  total_params(arch, V, s, L, h, a, kv, ffn, tied, bias) {
    const layer = params.layer_params(arch, h, a, kv, ffn, bias);
    const head = params.head_params(V, h, tied);
    const body = L * layer + params.norm_params(arch, h, bias) + head;
    return py_round(params.embedding_params(arch, V, s, h) + body);
  },
  params_per_gpu(arch, V, s, L, h, a, kv, ffn, tied, bias, t = 1, p = 1) {
    const layers = (L / p) * params.layer_params(arch, h, a, kv, ffn, bias, t);
    const emb = params.embedding_params(arch, V, s, h, t);
    const last_head = !tied || p > 1 ? (V * h) / t : 0;
    const last = layers + params.norm_params(arch, h, bias) + last_head;
    if (p === 1) return emb + last;
    return Math.max(emb + layers, last);
  },
  flop_params(arch, V, s, h, tied, total) {
    return total - (tied ? 0 : V * h) - (arch === "gpt" ? s * h : 0);
  },
  mla_params(h, a, q_rank, kv_rank, nope, rope, v) {
    const q_down = q_rank ? h * q_rank + q_rank : 0;
    const q_up = (q_rank || h) * a * (nope + rope);
    const kv_down = h * (kv_rank + rope) + kv_rank;
    return [q_up + kv_rank * a * (nope + v) + a * v * h, q_down + kv_down];
  },
  moe_shape(model) {
    return {
      experts: model.experts ?? 0,
      top_k: model.top_k ?? 0,
      shared: model.shared_experts ?? 0,
      expert_ffn: model.expert_ffn || model.ffn,
      every: model.moe_every ?? 1,
      dense: model.dense_layers ?? 0,
      mtp: model.mtp ?? 0,
    };
  },
  is_moe_layer(i, E, dense, every) {
    return E > 0 && i >= dense && i % every === 0;
  },
  stage_layers(L, p, v, j) {
    const chunk = Math.floor(L / (p * v)),
      found = [];
    for (let q = j; q < p * v; q += p) {
      for (let i = 0; i < chunk; i++) found.push(q * chunk + i);
    }
    return found;
  },
  moe_layer_parts(model, t = 1) {
    const { arch, hidden: h, heads: a, kv_heads: kv, ffn, bias } = model;
    const m = params.moe_shape(model);
    let attn_split, attn_rep;
    if ("mla" in model) {
      const x = model.mla;
      [attn_split, attn_rep] = params.mla_params(
        h,
        a,
        x.q_rank,
        x.kv_rank,
        x.nope,
        x.rope,
        x.v,
      );
    } else {
      [attn_split, attn_rep] = params.attention_params(h, a, kv, bias);
    }
    const attn = attn_split / t + attn_rep + 2 * params.norm_params(arch, h, bias);
    const [mlp_split, mlp_rep] = params.mlp_params(arch, h, ffn, bias);
    const [one_split, one_rep] = params.mlp_params(arch, h, m.expert_ffn, bias);
    const one = one_split + one_rep;
    const router = h * m.experts;
    return {
      attn: attn,
      mlp: mlp_split / t + mlp_rep,
      moe: m.shared * (one_split / t + one_rep) + router,
      experts: m.experts * one,
      active: attn + (m.top_k + m.shared) * one + router,
    };
  },
  mtp_params(h, layer, t = 1) {
    return (2 * h * h) / t + 3 * h + layer;
  },
  moe_counts(model, t = 1, p = 1, v = 1, ep = 1) {
    const { arch, vocab: V, seq: s, layers: L, hidden: h, tied, bias } = model;
    const m = params.moe_shape(model);
    const E = m.experts,
      dense = m.dense,
      every = m.every;
    const full = params.moe_layer_parts(model);
    const mine = params.moe_layer_parts(model, t);
    const count = (layers) =>
      sum(layers.map((i) => (params.is_moe_layer(i, E, dense, every) ? 1 : 0)));
    const moe_n = count([...Array(L).keys()]);
    const mtp_moe = params.is_moe_layer(L, E, dense, every);
    const mtp_layer = full.attn + (mtp_moe ? full.moe + full.experts : full.mlp);
    const mtp = m.mtp * params.mtp_params(h, mtp_layer);
    let ends =
      params.embedding_params(arch, V, s, h) + params.norm_params(arch, h, bias);
    ends += params.head_params(V, h, tied);
    const dense_part = (L - moe_n) * (full.attn + full.mlp);
    const main = ends + dense_part + moe_n * (full.attn + full.moe + full.experts);
    const active = ends + dense_part + moe_n * full.active;
    const mtp_active = mtp_moe ? full.active : full.attn + full.mlp;
    const mtp_flop = m.mtp * (params.mtp_params(h, mtp_active) + V * h);
    let best = null;
    for (let j = 0; j < p; j++) {
      const layers = params.stage_layers(L, p, v, j);
      const n_moe = count(layers);
      const n_dense = layers.length - n_moe;
      let own = n_dense * (mine.attn + mine.mlp) + n_moe * (mine.attn + mine.moe);
      let experts = (n_moe * mine.experts) / ep;
      if (j === 0) own += params.embedding_params(arch, V, s, h, t);
      if (j === p - 1) {
        own += params.norm_params(arch, h, bias) + (!tied || p > 1 ? (V * h) / t : 0);
        const mtp_own = mine.attn + (mtp_moe ? mine.moe : mine.mlp);
        own += m.mtp * params.mtp_params(h, mtp_own, t);
        experts += (m.mtp * mtp_moe * mine.experts) / ep;
      }
      if (best === null || own + experts > best[0] + best[1]) {
        best = [own, experts, n_dense, n_moe];
      }
    }
    return {
      total: py_round(main + mtp),
      main: py_round(main),
      active: py_round(active),
      flop: params.flop_params(arch, V, s, h, tied, py_round(active)) + mtp_flop,
      per_gpu: best[0],
      experts_per_gpu: best[1],
      stage_dense: best[2],
      stage_moe: best[3],
      moe_layers: moe_n,
      layer_active: (dense_part + moe_n * full.active) / L,
      layer_tp: mine.attn + params.largest_kind(mine, L - moe_n, moe_n, m.mtp, mtp_moe),
      layer_experts: mine.experts / ep,
      h_q: params.attention_width(model),
    };
  },
  largest_kind(mine, n_dense, n_moe, mtp, mtp_moe) {
    const has_dense = n_dense > 0 || (mtp > 0 && !mtp_moe);
    const has_moe = n_moe > 0 || (mtp > 0 && mtp_moe);
    return Math.max(has_dense ? mine.mlp : 0, has_moe ? mine.moe : 0);
  },
  attention_width(model) {
    if (!("mla" in model)) return model.hidden;
    const x = model.mla;
    return (model.heads * (x.nope + x.rope + x.v)) / 2;
  },
};

// snippets/sizing/memory.py (the tables are data: data.precisions, ...)
const memory = {
  optimizer_bytes(data, precision, optimizer) {
    return data.precisions[precision].master + data.optimizer_state[optimizer];
  },
  model_states(params_, weight, grad, optim, zero, n) {
    const found = model_state_bytes(zero, params_, n, weight, grad, optim);
    return {
      weights: found.parameters,
      gradients: found.gradients,
      optimizer: found.optimizer,
    };
  },
  zero3_buffer(layer_params, weight, zero, n) {
    return zero === 3 ? layer_params * weight * (1 - 1 / n) : 0.0;
  },
  total_bytes(parts) {
    return sum(Object.values(parts));
  },
  fits(total, capacity) {
    return total <= capacity;
  },
};

// snippets/sizing/activations.py
const activations = {
  layer_terms(arch, h, a, kv, ffn, e) {
    const dropout = arch === "gpt";
    const h_kv = kv * Math.floor(h / a);
    const R = 4 * e * h + 2 * h * dropout;
    const mlp = (arch === "gpt" ? 2 : 3) * e * ffn;
    const S = e * (2 * h + 2 * h_kv) + mlp;
    const A = e * a + (a + e * a) * dropout;
    return [R, S, A];
  },
  layer_bytes(
    arch,
    s,
    s_kv,
    b,
    h,
    a,
    kv,
    ffn,
    e,
    t = 1,
    sp = false,
    recompute = "none",
    flash = true,
  ) {
    if (recompute === "full") return (s * b * e * h) / (sp ? t : 1);
    const [R, S, A] = activations.layer_terms(arch, h, a, kv, ffn, e);
    const keep_scores = !flash && recompute === "none";
    return s * b * (R / (sp ? t : 1) + S / t + (keep_scores ? (A * s_kv) / t : 0));
  },
  in_flight(m, p, v = 1) {
    return Math.min(m, p) * (v > 1 ? 1 + (p - 1) / (p * v) : 1);
  },
  embedding_bytes(arch, s, b, h, t = 1, sp = false) {
    return arch === "gpt" ? (s * b * h) / (sp ? t : 1) : 0.0;
  },
  head_bytes(s, b, h, V, e, t = 1, sp = false) {
    return s * b * ((2 * e * h) / (sp ? t : 1) + (4 * V) / t);
  },
  activation_bytes(
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
    t = 1,
    sp = false,
    p = 1,
    v = 1,
    m = 1,
    cp = 1,
    kw = {},
  ) {
    const recompute = kw.recompute ?? "none",
      flash = kw.flash ?? true;
    const s_loc = s / cp;
    const one = activations.layer_bytes(
      arch,
      s_loc,
      s,
      b,
      h,
      a,
      kv,
      ffn,
      e,
      t,
      sp,
      recompute,
      flash,
    );
    let total =
      activations.in_flight(m, p, v) *
      ((L / p) * one + activations.embedding_bytes(arch, s_loc, b, h, t, sp));
    if (p === 1) total += activations.head_bytes(s_loc, b, h, V, e, t, sp);
    if (recompute === "full") {
      total += activations.layer_bytes(
        arch,
        s_loc,
        s,
        b,
        h,
        a,
        kv,
        ffn,
        e,
        t,
        sp,
        "none",
        flash,
      );
    }
    return total;
  },
  mean_ffn(L, moe_layers, ffn, active_ffn) {
    return ((L - moe_layers) * ffn + moe_layers * active_ffn) / L;
  },
};

// snippets/sizing/flops.py
const flops = {
  attention_flops(L, h_q, s, causal_halving = false) {
    return (12 * L * h_q * s) / (causal_halving ? 2 : 1);
  },
  recompute_flops(recompute, layer_params, L, h_q, s, causal_halving = false) {
    const attn_forward = flops.attention_flops(L, h_q, s, causal_halving) / 3;
    if (recompute === "selective") return attn_forward;
    if (recompute === "full") return 2 * L * layer_params + attn_forward;
    return 0.0;
  },
  utilization(flops_per_token, tokens_per_s, gpus, peak) {
    return (flops_per_token * tokens_per_s) / (gpus * peak);
  },
};

// snippets/sizing/traffic.py
const COSTS = {
  all_reduce: ring_cost,
  all_gather: ring_all_gather_cost,
  reduce_scatter: ring_reduce_scatter_cost,
};
const traffic = {
  bus_factor(kind, n) {
    if (kind === "send") return 1.0;
    return ((kind === "all_reduce" ? 2 : 1) * (n - 1)) / n;
  },
  call_seconds(kind, buffer, n, alpha, bw) {
    if (n === 1) return 0.0;
    if (kind === "send") return alpha + buffer / bw;
    if (kind === "all_to_all") return (n - 1) * alpha + (((n - 1) / n) * buffer) / bw;
    return COSTS[kind](n).time(buffer, Machine(alpha, 1 / bw));
  },
  sent_bytes(calls, n) {
    return sum(
      calls.map(([kind, buf, count]) => count * buf * traffic.bus_factor(kind, n)),
    );
  },
  seconds(calls, n, alpha, bw) {
    return sum(
      calls.map(
        ([k, buf, count]) => count * traffic.call_seconds(k, buf, n, alpha, bw),
      ),
    );
  },
  dp_calls(P, w, g, zero, m) {
    const grads = P * g,
      weights = P * w;
    if (zero === 0) return [["all_reduce", grads, 1]];
    if (zero === 3) {
      return [
        ["reduce_scatter", grads, m],
        ["all_gather", weights, 2 * m],
      ];
    }
    return [
      ["reduce_scatter", grads, zero === 2 ? m : 1],
      ["all_gather", weights, 1],
    ];
  },
  tp_calls(b, s_loc, h, e, layers, m, sp = false, recompute = "none") {
    const passes = recompute === "full" ? 3 : 2;
    const n_calls = 2 * passes * layers * m;
    const act = b * s_loc * h * e;
    if (sp)
      return [
        ["all_gather", act, n_calls],
        ["reduce_scatter", act, n_calls],
      ];
    return [["all_reduce", act, n_calls]];
  },
  pp_calls(b, s_loc, h, e, m, p, v = 1, t = 1, sp = false) {
    if (p === 1) return [];
    return [["send", (b * s_loc * h * e) / (sp ? t : 1), 2 * m * v]];
  },
  cp_calls(b, s_loc, h_kv, e, layers, m, cp, t = 1, recompute = "none") {
    if (cp === 1) return [];
    const passes = recompute === "full" ? 4 : 3;
    return [["send", (2 * b * s_loc * h_kv * e) / t, passes * (cp - 1) * layers * m]];
  },
  ep_calls(b, s_loc, h, e, k, moe_layers, m, ep, t = 1, recompute = "none") {
    if (ep === 1) return [];
    const passes = recompute === "full" ? 3 : 2;
    const rows = (k * b * s_loc) / t;
    return [["all_to_all", rows * h * e, 2 * passes * moe_layers * m]];
  },
  link(span, gpus_per_node, bw_intra, bw_inter, alphas) {
    if (span <= gpus_per_node) return [alphas.alpha_intra, bw_intra];
    return [alphas.alpha_inter, bw_inter];
  },
};

// snippets/sizing/throughput.py
const throughput = {
  compute_seconds(flops_, peak, efficiency) {
    return flops_ / (peak * efficiency);
  },
  bubble_factor(p, m, v = 1) {
    return 1 + (p - 1) / (v * m);
  },
  step_seconds(compute, bubble, dp, tp, pp, cp, overlap, ep = 0.0) {
    const hidden = Math.min(overlap * (dp + cp), compute);
    return compute * bubble + tp + pp + ep + dp + cp - hidden;
  },
  tokens_per_second(global_batch, s, step) {
    return (global_batch * s) / step;
  },
};

export {
  activations,
  flops,
  memory,
  params,
  py_round,
  throughput,
  traffic,
  UsageError,
};
