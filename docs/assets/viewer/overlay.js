/* Where each parallelism cuts the graph: the rules of
   snippets/viewer/parallel_overlay.py, written again for the page (the browser test
   holds the two equal). Degrees: {dp, tp, pp, cp, zero}; ranks are laid out tp
   fastest, then cp, pp, dp. Bytes are operand bytes per rank per step. */
(function () {
  "use strict";

  function stage(layer, pp, n) {
    if (layer < 0 || n === 0) return 0;
    return layer >= n ? pp - 1 : Math.floor((layer * pp) / n);
  }

  function ranksOfStage(s, d) {
    const ranks = [];
    for (let dp = 0; dp < d.dp; dp++)
      for (let c = 0; c < d.cp; c++)
        for (let t = 0; t < d.tp; t++) ranks.push(((dp * d.pp + s) * d.cp + c) * d.tp + t);
    return ranks.sort((a, b) => a - b);
  }

  // [values on one TP rank, bytes per value, Adam bytes per value] per own parameter
  function localTensors(m, tp) {
    const found = [];
    for (const t of m.tensors) {
      if (t.kind !== "parameter" || !t.numel) continue;
      const split = m.tp === "column" || m.tp === "vocab" || (m.tp === "row" && t.name !== "bias");
      found.push([t.numel / (split ? tp : 1), Math.floor(t.bytes / t.numel),
                  t.dtype === "float32" ? 8 : 12]);
    }
    return found;
  }

  // snippets/parallel/zero_memory.py: model_state_bytes and comm_values (ZeRO §5, §7)
  function modelStateBytes(stage, psi, N, p, g, K) {
    return { parameters: (p * psi) / (stage >= 3 ? N : 1),
             gradients: (g * psi) / (stage >= 2 ? N : 1),
             optimizer: (K * psi) / (stage >= 1 ? N : 1) };
  }
  const commValues = (stage, psi) => (stage === 3 ? 3 : 2) * psi;
  const DP_NAMES = ["all-reduce grads", "reduce-scatter grads, all-gather params",
    "reduce-scatter grads, all-gather params", "all-gather params ×2, reduce-scatter grads"];

  function collectives(g, d) {
    const n = g.stack.length, found = [];
    const mods = new Map(g.modules.map((m) => [m.id, m]));
    const ops = new Map(g.ops.map((o) => [o.id, o]));
    const inputs = new Map(g.inputs.map((i) => [i.id, i]));
    const outBytes = (id) =>
      (ops.get(id) || inputs.get(id)).out.reduce((s, o) => s + (o ? o.bytes : 0), 0);
    const add = (kind, name, at, s, bytes) => found.push({ kind, name, at, stage: s, bytes });
    const shared = new Set(), sent = new Set();
    for (const op of g.ops) {
      const s = stage(op.layer, d.pp, n), role = mods.get(op.module).tp;
      if (d.tp > 1 && (role === "row" || role === "vocab"))
        add("tp", "all-reduce (fwd)", op.id, s, (2 * outBytes(op.id)) / d.cp);
      if (d.tp > 1 && role === "column")
        for (const i of op.inputs)
          if (!shared.has(i)) {
            shared.add(i);
            add("tp", "all-reduce (bwd)", i, s, (2 * outBytes(i)) / d.cp);
          }
      if (d.cp > 1 && op.op.includes("scaled_dot_product")) {
        const kv = op.inputs.slice(1, 3).reduce((a, i) => a + outBytes(i), 0);
        add("cp", "all-gather K, V", op.id, s, (2 * kv) / d.tp);
      }
      for (const i of op.inputs) {
        const up = ops.has(i) ? stage(ops.get(i).layer, d.pp, n) : 0;
        if (d.pp > 1 && up < s && !sent.has(i + "\u0000" + s)) {
          sent.add(i + "\u0000" + s);
          add("pp", "send/recv", i, up, (2 * outBytes(i)) / d.cp);
        }
      }
    }
    if (d.dp > 1)
      for (const m of g.modules) {
        const values = localTensors(m, d.tp).reduce((a, [psi, size]) => a + psi * size, 0);
        if (values)
          add("dp", DP_NAMES[Math.min(d.zero, 3)], m.id, stage(m.layer, d.pp, n),
              commValues(d.zero, values));
      }
    return found;
  }

  function rankBytes(g, d) {
    const n = g.stack.length, rows = [];
    for (let s = 0; s < d.pp; s++)
      rows.push({ stage: s, ranks: ranksOfStage(s, d), weights: 0, grads: 0,
                  optimizer: 0, tp: 0, pp: 0, cp: 0, dp: 0 });
    for (const m of g.modules) {
      const row = rows[stage(m.layer, d.pp, n)];
      for (const [psi, size, K] of localTensors(m, d.tp)) {
        const held = modelStateBytes(d.zero, psi, d.dp, size, size, K);
        row.weights += held.parameters;
        row.grads += held.gradients;
        row.optimizer += held.optimizer;
      }
    }
    for (const c of collectives(g, d)) rows[c.stage][c.kind] += c.bytes;
    for (const r of rows) r.total = r.weights + r.grads + r.optimizer;
    return rows;
  }

  window.CPViewerOverlay = { stage, ranksOfStage, localTensors, collectives, rankBytes };
})();
