/* Where each parallelism cuts the graph: snippets/viewer/parallel_overlay.py (stages,
   rank grid) and overlay_bytes.py (bytes), ported function by function. Every byte
   count is the sizing calculator's: docs/assets/sizing/formulas.js
   ( itself held equal to Python's estimate()) applied to the graph's
   shapes, with the bytes per precision the graph carries (graph.sizing). Degrees:
   {dp, tp, pp, cp, zero, sp, ep}; ranks are laid out tp fastest, then cp, pp, dp, and
   ep is folded over dp: EP rank r of a mixture's E experts holds [rE/ep, (r+1)E/ep). */
import { memory, traffic } from "../sizing/formulas.js";

const PLACES = 4; // TP collectives a layer: tp_calls counts 4 a layer a micro-batch
const DP_NAMES = [
  "all-reduce grads",
  "reduce-scatter grads, all-gather params",
  "reduce-scatter grads, all-gather params",
  "reduce-scatter grads, all-gather params ×2",
];
const COLUMNS = [
  "weights",
  "grads",
  "optimizer",
  "buffers",
  "tp",
  "pp",
  "cp",
  "dp",
  "ep",
];
const EP_NAMES = [
  "dispatch: all-to-all (fwd), reversed (bwd)",
  "combine: all-to-all (fwd), reversed (bwd)",
];
const epOf = (d) => d.ep || 1;
const prod = (xs) => xs.reduce((a, x) => a * x, 1);

function stage(layer, pp, n) {
  if (layer < 0 || n === 0) return 0;
  return layer >= n ? pp - 1 : Math.floor((layer * pp) / n);
}

function ranksOfStage(s, d) {
  const ranks = [];
  for (let dp = 0; dp < d.dp; dp++)
    for (let c = 0; c < d.cp; c++)
      for (let t = 0; t < d.tp; t++)
        ranks.push(((dp * d.pp + s) * d.cp + c) * d.tp + t);
  return ranks.sort((a, b) => a - b);
}

// parallel_overlay.py: mixtures, check_degrees, ep_rank, ranks_of_ep_rank
const mixtures = (g) => g.modules.filter((m) => "moe" in m);

function checkDegrees(g, d) {
  // "" when they fit, else the Python's one line
  const ep = epOf(d),
    found = mixtures(g);
  if (ep < 1 || d.dp % ep)
    return (
      `ep ${ep} does not divide dp = ${d.dp}: expert parallelism folds over ` +
      "data parallelism"
    );
  if (ep > 1 && !found.length)
    return `ep ${ep} needs a model with experts: this one has none`;
  for (const m of found) {
    const n = m.moe.experts.length;
    if (n % ep) return `ep ${ep} does not split the ${n} experts of ${m.id}`;
  }
  return "";
}
function check(g, d) {
  const line = checkDegrees(g, d);
  if (line) throw new Error(line);
}

const epRank = (expert, nExperts, ep) => Math.floor(expert / Math.floor(nExperts / ep));

function ranksOfEpRank(s, r, d) {
  const ranks = [];
  for (let dp = r; dp < d.dp; dp += epOf(d))
    for (let c = 0; c < d.cp; c++)
      for (let t = 0; t < d.tp; t++)
        ranks.push(((dp * d.pp + s) * d.cp + c) * d.tp + t);
  return ranks.sort((a, b) => a - b);
}

const precision = (dtype) => (dtype === "float32" ? "fp32" : "bf16-mixed");
const splitByTp = (m, t) =>
  m.tp === "column" || m.tp === "vocab" || (m.tp === "row" && t.name !== "bias");

// [module, stage, values on one TP rank, precision] of every parameter held
function held(g, d) {
  const n = g.stack.length,
    mods = new Map(g.modules.map((m) => [m.id, m])),
    found = [];
  for (const m of g.modules) {
    const s = stage(m.layer, d.pp, n);
    const copies = (m.tied || []).filter(
      (t) => stage(mods.get(t.owner).layer, d.pp, n) !== s,
    );
    for (const t of m.tensors.concat(copies))
      if (t.kind === "parameter" && t.numel)
        found.push([m, s, t.numel / (splitByTp(m, t) ? d.tp : 1), precision(t.dtype)]);
  }
  return found;
}

// overlay_bytes.py: an expert's ZeRO group is dp·cp/ep, and 1/ep of a stage holds it
const zeroGroup = (m, d) => Math.floor((d.dp * d.cp) / ("expert" in m ? epOf(d) : 1));
const share = (m, d) => ("expert" in m ? 1 / epOf(d) : 1.0);

const blockOf = (id, stack) => stack.find((b) => `${id}.`.startsWith(`${b}.`)) || "";

function rankBytes(g, d) {
  check(g, d);
  const rows = [],
    data = g.sizing,
    blocks = new Map();
  const mods = new Map(g.modules.map((m) => [m.id, m]));
  for (let s = 0; s < d.pp; s++) {
    const row = { stage: s, ranks: ranksOfStage(s, d) };
    for (const c of COLUMNS) row[c] = 0.0;
    rows.push(row);
  }
  for (const [m, s, psi, prec] of held(g, d)) {
    const w = data.precisions[prec].weight,
      gr = data.precisions[prec].grad;
    const k = data.precisions[prec].master + data.optimizer_state.adam;
    const n = zeroGroup(m, d),
      part = share(m, d);
    const states = memory.model_states(psi, w, gr, k, d.zero, n);
    rows[s].weights += part * states.weights;
    rows[s].grads += part * states.gradients;
    rows[s].optimizer += part * states.optimizer;
    const block = blockOf(m.id, g.stack);
    if (block) {
      const key = `${s}\u0000${block}`;
      if (!blocks.has(key)) blocks.set(key, [0.0, 0.0]); // [others, experts held]
      blocks.get(key)["expert" in m ? 1 : 0] += part * psi * w;
    }
  }
  for (const [key, [size, experts]] of blocks) {
    // the largest block, gathered
    const s = Number(key.split("\u0000")[0]);
    let buffer = memory.zero3_buffer(size, 1, d.zero, d.dp * d.cp); // (ZeRO-3)
    buffer += memory.zero3_buffer(
      experts,
      1,
      d.zero,
      Math.floor((d.dp * d.cp) / epOf(d)),
    );
    rows[s].buffers = Math.max(rows[s].buffers, buffer);
  }
  for (const c of collectives(g, d)) {
    const part = c.kind === "dp" ? share(mods.get(c.at), d) : 1.0;
    rows[c.stage][c.kind] += part * c.bytes;
  }
  for (const r of rows) r.total = r.weights + r.grads + r.optimizer + r.buffers;
  return rows;
}

function dims(out, cp) {
  // [b, s_loc, h, e] of an activation (B, N, …) or (N, h)
  const shape = out.shape.length >= 3 ? out.shape : [1].concat(out.shape);
  const b = shape[0],
    s = shape[1],
    width = prod(shape.slice(2));
  return [b, s / cp, width, out.bytes / (b * s * width)];
}
function dims4(out, cp) {
  // [b, s_loc, h_kv, e] of attention's K
  const [B, H, N, hd] = out.shape;
  return [B, N / cp, H * hd, out.bytes / (B * H * N * hd)];
}

function collectives(g, d) {
  check(g, d);
  const n = g.stack.length,
    found = [];
  const mods = new Map(g.modules.map((m) => [m.id, m]));
  const ops = new Map(g.ops.map((o) => [o.id, o]));
  for (const i of g.inputs) ops.set(i.id, i);
  const sp = Boolean(d.sp) && d.tp > 1;
  const add = (kind, name, at, s, calls, group) =>
    found.push({
      kind,
      name,
      at,
      stage: s,
      calls,
      group,
      bytes: traffic.sent_bytes(calls, group),
    });
  const tp = (name, at, s) =>
    add(
      "tp",
      name,
      at,
      s,
      traffic.tp_calls(...dims(ops.get(at).out[0], d.cp), 1 / PLACES, 1, sp),
      d.tp,
    );
  const shared = new Set(),
    sent = new Set();
  for (const op of g.ops) {
    const s = stage(op.layer, d.pp, n),
      role = mods.get(op.module).tp;
    const inside = op.layer >= 0 && op.layer < n;
    if (d.tp > 1 && inside && role === "row")
      tp(sp ? "reduce-scatter (fwd), all-gather (bwd)" : "all-reduce (fwd)", op.id, s);
    if (d.tp > 1 && inside && role === "column")
      for (const i of op.inputs.slice(0, 1))
        if (!shared.has(i)) {
          shared.add(i);
          tp(sp ? "all-gather (fwd), reduce-scatter (bwd)" : "all-reduce (bwd)", i, s);
        }
    if (d.cp > 1 && op.op.includes("scaled_dot_product")) {
      const [b, sLoc, hKv, e] = dims4(ops.get(op.inputs[1]).out[0], d.cp);
      add(
        "cp",
        "K, V around the ring",
        op.id,
        s,
        traffic.cp_calls(b, sLoc, hKv, e, 1, 1, d.cp, d.tp),
        d.cp,
      );
    }
    for (const i of op.inputs) {
      const src = ops.get(i),
        up = "layer" in src ? stage(src.layer, d.pp, n) : 0;
      if (d.pp > 1 && up < s && !sent.has(`${i}\u0000${s}`)) {
        sent.add(`${i}\u0000${s}`);
        add(
          "pp",
          "send/recv",
          i,
          up,
          traffic.pp_calls(...dims(src.out[0], d.cp), 1, d.pp, 1, d.tp, sp),
          2,
        );
      }
    }
  }
  if (epOf(d) > 1)
    for (const moe of mixtures(g)) {
      const [b, sLoc, h, e] = dims(ops.get(moeInput(g, moe.id, ops)).out[0], d.cp);
      const s = stage(moe.layer, d.pp, n);
      const ep = epOf(d),
        k = moe.moe.top_k;
      const calls = traffic.ep_calls(b, sLoc, h, e, k, 1 / 2, 1, ep, d.tp);
      for (const name of EP_NAMES) add("ep", name, moe.id, s, calls, ep);
    }
  if (d.dp * d.cp > 1) {
    const mine = new Map();
    for (const [m, s, psi, prec] of held(g, d)) {
      if (!mine.has(m.id)) mine.set(m.id, [s, 0.0, prec]);
      mine.get(m.id)[1] += psi;
    }
    for (const [id, [s, psi, prec]] of mine) {
      const p = g.sizing.precisions[prec],
        group = zeroGroup(mods.get(id), d);
      if (group > 1)
        // an expert whose holders are its ep group's only: none
        add(
          "dp",
          DP_NAMES[d.zero],
          id,
          s,
          traffic.dp_calls(psi, p.weight, p.grad, d.zero, 1),
          group,
        );
    }
  }
  return found;
}

function moeInput(g, moeId, ops) {
  // the first outside input of its first op
  const prefix = moeId ? `${moeId}.` : "";
  const inside = (module) => module !== undefined && `${module}.`.startsWith(prefix);
  for (const op of g.ops)
    if (inside(op.module))
      for (const i of op.inputs) if (!inside(ops.get(i).module)) return i;
  throw new Error(`${moeId || "the model"} runs no operation on an input`);
}

// DP and ZeRO markers (overlay_dp.py): module → parts, subtree bytes, own bytes
const OF = { all_reduce: "grads", reduce_scatter: "grads", all_gather: "params" };
const WHEN = {
  "0all_reduce": "after backward",
  "1reduce_scatter": "after backward",
  "1all_gather": "after the step",
  "2reduce_scatter": "during backward",
  "2all_gather": "after the step",
  "3all_gather": "before forward and backward",
  "3reduce_scatter": "during backward",
};
function dpMarkers(g, d) {
  const mods = new Map(g.modules.map((m) => [m.id, m]));
  const found = new Map();
  for (const c of collectives(g, d)) {
    if (c.kind !== "dp") continue;
    for (
      let node = c.at;
      node !== null && node !== undefined;
      node = mods.get(node).parent
    ) {
      // an expert's own marker: what its holders send; above it, 1/ep of that
      const part = "expert" in mods.get(node) ? 1.0 : share(mods.get(c.at), d);
      if (!found.has(node))
        found.set(node, {
          name: c.name,
          group: c.group,
          parts: new Map(),
          bytes: 0.0,
          own: 0.0,
          stages: new Map(),
        });
      const mark = found.get(node);
      for (const [kind, buf, count] of c.calls) {
        const when = WHEN[d.zero + kind],
          key = `${kind}\u0000${when}`;
        if (!mark.parts.has(key))
          mark.parts.set(key, {
            collective: kind,
            of: OF[kind],
            when,
            calls: 0,
            payload: 0.0,
            bytes: 0.0,
          });
        const p = mark.parts.get(key);
        p.calls += part * count;
        p.payload += part * (count * buf);
        p.bytes += part * traffic.sent_bytes([[kind, buf, count]], c.group);
      }
      mark.bytes += part * c.bytes;
      if (node === c.at) mark.own += c.bytes;
      mark.stages.set(c.stage, (mark.stages.get(c.stage) || 0.0) + part * c.bytes);
    }
  }
  for (const mark of found.values()) mark.parts = [...mark.parts.values()];
  return found;
}

export {
  COLUMNS,
  checkDegrees,
  collectives,
  dpMarkers,
  epRank,
  held,
  mixtures,
  rankBytes,
  ranksOfEpRank,
  ranksOfStage,
  stage,
};
