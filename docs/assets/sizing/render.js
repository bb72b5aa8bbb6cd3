/* The sizing calculator's outputs, drawn from one `--json` object (cli.js): the
   figures, a stacked bar of the memory on the most loaded GPU against the GPU's
   capacity, one of the step time (compute, pipeline bubble, and the communication
   the overlap leaves exposed), and the bytes and seconds of each parallelism. Plain
   HTML and CSS, so the page redraws on every keystroke; the colours are the charts'
   palette (snippets/core/chart_style.py, from the page data). Every drawn number
   keeps its full value in a data-value attribute. */

function el(tag, attrs, parent, text) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  if (parent) parent.appendChild(e);
  return e;
}

const en = (x, opts) => x.toLocaleString("en-US", opts);
const GB = (x) =>
  `${en(x / 1e9, { maximumFractionDigits: 2, minimumFractionDigits: 2 })} GB`;
const sig = (x, n = 4) =>
  x === 0 ? "0" : en(Number(x.toPrecision(n)), { maximumSignificantDigits: n });
const count = (x) =>
  x >= 1e9 ? `${sig(x / 1e9)} B` : x >= 1e6 ? `${sig(x / 1e6)} M` : sig(x);
const pct = (x) => `${(100 * x).toFixed(1)}%`;
const secs = (x) =>
  x >= 1 ? `${sig(x)} s` : x >= 1e-3 ? `${sig(x * 1e3)} ms` : `${sig(x * 1e6)} µs`;
const tokens = (x) => en(Math.round(x));

function swatch(parent, colour) {
  const s = el("span", { class: "cp-sizing__swatch", "aria-hidden": "true" }, parent);
  if (colour) s.style.background = colour;
}

// parts: [name, value, text, colour]; marker: [label, value] drawn as a line
function stacked(box, title, parts, scale, marker) {
  el("h3", {}, box, title);
  const words = parts.map(([name, , text]) => `${name} ${text}`).join(", ");
  const bar = el(
    "div",
    { class: "cp-sizing__bar", role: "img", "aria-label": `${title}: ${words}` },
    box,
  );
  const legend = el("ul", { class: "cp-sizing__legend" }, box);
  for (const [name, value, text, colour] of parts) {
    const seg = el(
      "span",
      {
        class: "cp-sizing__seg",
        "data-part": name,
        "data-value": String(value),
        title: `${name}: ${text}`,
      },
      bar,
    );
    seg.style.width = `${scale > 0 ? (100 * value) / scale : 0}%`;
    seg.style.background = colour;
    const item = el("li", { "data-part": name }, legend);
    swatch(item, colour);
    item.append(`${name} ${text}`);
  }
  if (marker) {
    const line = el("span", { class: "cp-sizing__marker", "aria-hidden": "true" }, bar);
    line.style.left = `${Math.min(100, (100 * marker[1]) / scale)}%`;
    const item = el("li", { class: "cp-sizing__marker-key" }, legend);
    swatch(item);
    item.append(marker[0]);
  }
}

function figures(box, r) {
  const mem = r.memory_bytes,
    cap = r.memory_capacity_bytes;
  const dl = el("dl", { class: "cp-sizing__figures" }, box);
  const fig = (key, name, value, text) => {
    const item = el("div", {}, dl);
    el("dt", {}, item, name);
    return el("dd", { "data-key": key, "data-value": String(value) }, item, text);
  };
  // every parameter once, then what one GPU keeps: its TP×PP shard, or under
  // ZeRO-3 a 1/(dp·cp) slice of it (estimate.py's params_held_per_gpu)
  fig("params", "parameters", r.params, `${count(r.params)} in all`);
  const i = r.inputs,
    sharded = r.params_per_gpu < r.params;
  const held = `${count(r.params_held_per_gpu)} ${
    i.zero === 3
      ? `under ZeRO-3 (of ${count(r.params_per_gpu)})`
      : sharded
        ? "(a TP×PP shard)"
        : "(every one)"
  }`;
  fig("params_held_per_gpu", "held per GPU", r.params_held_per_gpu, held);
  if (r.expert_params_per_gpu > 0) {
    fig(
      "params_active",
      "active a token",
      r.params_active,
      `${count(r.params_active)}; experts ${count(r.expert_params_per_gpu)} per GPU`,
    );
    fig(
      "all_to_all_bytes_per_moe_layer",
      "all-to-all a MoE layer",
      r.all_to_all_bytes_per_moe_layer,
      GB(r.all_to_all_bytes_per_moe_layer),
    );
  }
  const verdict = fig(
    "fits",
    "memory a GPU",
    mem.total,
    `${GB(mem.total)} of ${GB(cap)} `,
  );
  el(
    "strong",
    { class: r.fits ? "cp-sizing__fits" : "cp-sizing__nofit" },
    verdict,
    r.fits ? "fits" : "does not fit",
  );
  verdict.dataset.fits = String(r.fits);
  fig("step_time_s", "step", r.step_time_s, secs(r.step_time_s));
  fig("tokens_per_s", "tokens/s", r.tokens_per_s, tokens(r.tokens_per_s));
  fig("mfu", "MFU (HFU)", r.mfu, `${pct(r.mfu)} (${pct(r.hfu)})`);
  fig(
    "flops_per_token",
    "FLOPs a token",
    r.flops_per_token,
    `${sig(r.flops_per_token / 1e9)} G`,
  );
  // what an answer cannot say alone (estimate.py's warnings), under its figure
  for (const [key, text] of Object.entries(r.warnings)) {
    const dd = dl.querySelector(`dd[data-key=${WHY[key] || key}]`);
    dd.parentElement.classList.add("cp-sizing__wide");
    el("span", { class: "cp-sizing__why", "data-warning": key }, dd, text);
  }
}
const WHY = { memory_bytes: "fits" }; // the figure a warning's key explains

function memoryBar(box, r, P) {
  const mem = r.memory_bytes,
    cap = r.memory_capacity_bytes;
  const names = ["weights", "gradients", "optimizer", "activations", "buffers"];
  const parts = names
    .map((k, i) => [k, mem[k], GB(mem[k]), P[i]])
    .filter(([, v]) => v > 0);
  stacked(box, "Memory on the most loaded GPU", parts, Math.max(mem.total, cap), [
    `the GPU's ${GB(cap)}`,
    cap,
  ]);
}

function timeBar(box, r, P) {
  // step = compute·bubble + tp + pp + ep + dp + cp - hidden (sizing/throughput.py)
  const cs = r.comm_seconds_per_step,
    compute = r.compute_seconds_per_step;
  const overlapped = cs.dp + cs.cp;
  const hidden = Math.min(r.inputs.overlap * overlapped, compute);
  const exposed = overlapped > 0 ? (overlapped - hidden) / overlapped : 0;
  const parts = [
    ["compute", compute, P[0]],
    ["pipeline bubble", compute * (r.bubble_factor - 1), P[8]],
    ["TP", cs.tp, P[3]],
    ["PP", cs.pp, P[5]],
    ["EP", cs.ep, P[6]],
    ["DP", cs.dp * exposed, P[1]],
    ["CP", cs.cp * exposed, P[2]],
  ]
    .filter(([, v]) => v > 0)
    .map(([k, v, colour]) => [k, v, secs(v), colour]);
  stacked(box, "Step time: compute and exposed communication", parts, r.step_time_s);
}

function commTable(box, r) {
  const table = el("table", { class: "cp-sizing__comm" }, box);
  el("caption", {}, table, "Communication a GPU sends a step (α-β time)");
  const head = el("tr", {}, el("thead", {}, table));
  for (const t of ["parallelism", "bytes", "seconds"]) {
    el("th", { scope: "col" }, head, t);
  }
  const body = el("tbody", {}, table);
  for (const k of ["dp", "tp", "pp", "cp", "ep"]) {
    const bytes = r.comm_bytes_per_step[k],
      s = r.comm_seconds_per_step[k];
    const row = el("tr", { "data-key": k }, body);
    el("th", { scope: "row" }, row, k.toUpperCase());
    el("td", { "data-value": String(bytes) }, row, GB(bytes));
    el("td", { "data-value": String(s) }, row, secs(s));
  }
}

// the figures and bars into box; the communication table into table (or box)
function render(box, r, palette, table) {
  box.replaceChildren();
  figures(box, r);
  memoryBar(el("div", { class: "cp-sizing__chart" }, box), r, palette);
  timeBar(el("div", { class: "cp-sizing__chart" }, box), r, palette);
  if (table) table.replaceChildren();
  commTable(table || box, r);
}

// one line for a screen reader's live region
function summary(r) {
  return (
    `${GB(r.memory_bytes.total)} a GPU, ${r.fits ? "fits" : "does not fit"}; ` +
    `${tokens(r.tokens_per_s)} tokens/s; MFU ${pct(r.mfu)}`
  );
}

export { el, render, summary };
