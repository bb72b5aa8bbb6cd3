/* The model viewer: draws a graph exported by snippets/viewer/graph_export.py.

   The graph comes from a <script type="application/json" class="cp-viewer__graph">
   inside each <figure class="cp-viewer">, or from window.MODEL_GRAPH (a .js data file,
   so a standalone page works from file://). The page opens collapsed to the top-level
   modules; each expanded module is laid out on its own by dagre (collapsed children
   are boxes of fixed size), and a change re-lays only the module and its ancestors.
   Edges between two children of a module are routed by that module's layout. Each
   open module's drawing is kept, in its own coordinates, and updated in place: a
   toggle moves the boxes around it and draws only what opened or closed.
   Legibility: the smallest text is drawn at TEXT_MIN px and no zoom goes below scale
   1, so every label is at least TEXT_MIN px on screen, after "Expand all" and on a
   phone alike; what does not fit is panned to (drag, wheel, arrows, two fingers), and
   each expand or collapse refits the view around the module it toggled. Boxes are as
   wide as their text measures in the page's font.
   Keys: / search, + - zoom, 0 fit, e expand all, c collapse all, arrows pan,
   Enter or Space on a module toggles it. */
import { html, svg as make } from "../javascripts/dom.js";
import * as O from "./overlay.js";

const HEAD = 24,
  PAD = 10,
  BOX_H = 44,
  OP_H = 30,
  STAGES = 8;
const TEXT = 12,
  TEXT_MIN = 11; // px in the graph's own units (CSS: viewer.css)
const K_MIN = 1,
  K_MAX = 4; // zoom: never below TEXT_MIN px on screen

const num = (n) =>
  n >= 1e9
    ? `${(n / 1e9).toFixed(2)} G`
    : n >= 1e6
      ? `${(n / 1e6).toFixed(2)} M`
      : n >= 1e4
        ? `${(n / 1e3).toFixed(1)} k`
        : String(Math.round(n));
const bytes = (b) =>
  b >= 2 ** 30
    ? `${(b / 2 ** 30).toFixed(2)} GiB`
    : b >= 2 ** 20
      ? `${(b / 2 ** 20).toFixed(2)} MiB`
      : b >= 1024
        ? `${(b / 1024).toFixed(1)} KiB`
        : `${Math.round(b)} B`;
const shape = (o) => (o ? `${o.shape.join("×")} ${o.dtype}` : "–");
const widths = new Map(),
  ctx = document.createElement("canvas").getContext("2d");
function measure(text, px, family) {
  // the text's width as the SVG will draw it
  const key = `${px}\u0000${text}`;
  if (!widths.has(key)) {
    ctx.font = `${px}px ${family}`;
    widths.set(key, Math.ceil(ctx.measureText(text).width));
  }
  return widths.get(key);
}

class Model {
  constructor(g) {
    this.g = g;
    this.mods = new Map(g.modules.map((m) => [m.id, { ...m, kids: [], ops: [] }]));
    for (const m of this.mods.values())
      if (m.parent !== null && this.mods.has(m.parent))
        this.mods.get(m.parent).kids.push(m.id);
    this.ops = new Map();
    const nodes = [
      ...g.inputs.map((i) => ({
        id: i.id,
        op: "input",
        module: "",
        inputs: [],
        out: i.out,
        flops: 0,
        layer: -1,
      })),
      ...g.ops,
      {
        id: "output",
        op: "output",
        module: "",
        inputs: g.outputs,
        out: [],
        flops: 0,
        layer: g.stack.length,
      },
    ];
    for (const op of nodes) {
      const parts = op.module ? op.module.split(".") : [];
      op.chain = [""].concat(parts.map((_, i) => parts.slice(0, i + 1).join(".")));
      this.ops.set(op.id, op);
      this.mods.get(op.module).ops.push(op.id);
    }
    this.used = new Set(); // modules that run an op somewhere below them
    for (const op of this.ops.values()) for (const c of op.chain) this.used.add(c);
    this.edgesAt = new Map(); // lowest common module of an edge → its edges
    for (const v of this.ops.values())
      for (const u of v.inputs) {
        if (!this.ops.has(u)) continue;
        const a = this.ops.get(u).chain,
          b = v.chain;
        let k = 0;
        while (k + 1 < a.length && k + 1 < b.length && a[k + 1] === b[k + 1]) k++;
        const at = a[k];
        if (!this.edgesAt.has(at)) this.edgesAt.set(at, []);
        this.edgesAt.get(at).push([u, v.id]);
      }
  }
  depth(id) {
    return id ? id.split(".").length : 0;
  }
  // the key, within module m, of the item holding op id
  childKey(m, opId) {
    const op = this.ops.get(opId),
      c = op.chain[this.depth(m) + 1];
    return c === undefined ? `o:${opId}` : `m:${c}`;
  }
}

let fieldIds = 0; // ids of the fields' messages, unique on the page

class Viewer {
  constructor(root, graph, start) {
    this.root = root;
    this.model = new Model(graph);
    this.expanded = new Set([""]);
    this.cache = new Map();
    this.view = { k: 1, x: 0, y: 0 };
    this.degrees = Object.assign(
      { dp: 1, tp: 1, pp: 1, cp: 1, zero: 0, sp: 0, ep: 1 },
      start || {},
    );
    this.timing = { layout: 0 }; // ms inside dagre.layout since the last render
    this.matches = new Set();
    this.views = new Map(); // open module → its drawing (sync)
    this.build();
    this.redraw();
    this.fit();
  }

  build() {
    const r = this.root,
      g = this.model.g;
    r.classList.add("cp-viewer--ready");
    r.setAttribute("tabindex", "0");
    this.family = getComputedStyle(r).fontFamily || "sans-serif";
    if (g.level === "module")
      // no tracer captured it: say what the nodes are
      html(
        "p",
        "cp-viewer__level",
        r,
        "Graph at module level: each node is one " +
          "call of a module, recorded by forward hooks on an eager run (shapes, " +
          "parameters and FLOPs per call; no operations inside a module). Neither " +
          "tracer captured the model: " +
          g.why +
          ".",
      );
    const bar = html("div", "cp-viewer__bar", r);
    const btn = (label, fn, key) => {
      const b = html("button", "cp-viewer__btn", bar, label);
      b.type = "button";
      b.title = `${label} (key ${key})`;
      b.addEventListener("click", fn);
    };
    btn("Expand all", () => this.expandAll(), "e");
    btn("Collapse all", () => this.collapseAll(), "c");
    btn("Fit", () => this.fit(), "0");
    this.search = html("input", "cp-viewer__search", bar);
    this.search.type = "search";
    this.search.placeholder = "search module or op  (/)";
    this.search.setAttribute("aria-label", "search modules and operations");
    this.search.addEventListener("input", () => this.find(this.search.value));
    this.search.addEventListener("keydown", (e) => {
      if (e.key === "Enter") this.next();
      e.stopPropagation();
    });
    this.found = html("span", "cp-viewer__found", bar);
    const over = html("div", "cp-viewer__overlay", r);
    html("span", "cp-viewer__label", over, "Parallelism:");
    const fields = [
      ["dp", [1, 2, 4, 8]],
      ["tp", [1, 2, 4, 8]],
      ["pp", [1, 2, 3, 4, 8]],
      ["cp", [1, 2, 4]],
      ["zero", [0, 1, 2, 3]],
      ["sp", [0, 1]],
    ];
    const experts = O.mixtures(g).length > 0;
    if (experts) fields.push(["ep", [1, 2, 4, 8]]); // only a model with experts
    for (const [k, choices] of fields) {
      const lab = html(
        "label",
        "cp-viewer__degree",
        over,
        k === "zero" ? "ZeRO " : k === "sp" ? "SP " : `${k} `,
      );
      const sel = html("select", "", lab);
      sel.name = k;
      for (const c of choices) {
        const o = html("option", "", sel, k === "sp" ? (c ? "on" : "off") : String(c));
        o.value = String(c);
      }
      sel.value = String(Number(this.degrees[k]));
      sel.addEventListener("change", () => {
        this.degrees[k] = Number(sel.value);
        this.redraw();
      });
      if (k === "ep") {
        // its field says when ep does not fit, in the Python's words
        this.epField = sel;
        this.epError = html("span", "cp-viewer__error", over);
        this.epError.id = `cp-viewer-ep-${++fieldIds}`;
        this.epError.setAttribute("role", "alert");
        sel.setAttribute("aria-describedby", this.epError.id);
      }
    }
    this.legend = html("div", "cp-viewer__key", r);
    this.svg = make(
      "svg",
      {
        class: "cp-viewer__svg",
        role: "group",
        "aria-label": "model graph: Tab to a node, Enter to expand",
      },
      r,
    );
    this.layer = make("g", {}, this.svg);
    this.panel = html("div", "cp-viewer__info", r);
    this.panel.setAttribute("aria-live", "polite");
    this.hint();
    this.table = html("div", "cp-viewer__ranks", r);
    this.table.tabIndex = 0; // a region that scrolls must be reachable by keyboard
    this.table.setAttribute("role", "region");
    const caption = r.querySelector("figcaption"); // two viewers on a page differ
    this.table.setAttribute(
      "aria-label",
      "bytes per rank, by pipeline stage" +
        (caption ? `: ${caption.textContent.trim()}` : ""),
    );
    this.panZoom();
    r.addEventListener("keydown", (e) => this.onKey(e));
  }

  // drag (mouse, pen, one finger) pans, once it has moved a few pixels (a tap stays
  // a click on its node); two fingers pinch to zoom; the wheel pans, with Ctrl (a
  // trackpad's pinch) it zooms
  panZoom() {
    const down = new Map();
    let pinch = null;
    const at = (e) => {
      const b = this.svg.getBoundingClientRect();
      return [e.clientX - b.left, e.clientY - b.top];
    };
    this.svg.addEventListener(
      "wheel",
      (e) => {
        e.preventDefault();
        if (e.ctrlKey || e.metaKey) this.zoom(Math.exp(-e.deltaY * 0.01), ...at(e));
        else this.pan(-e.deltaX, -e.deltaY);
      },
      { passive: false },
    );
    this.svg.addEventListener("pointerdown", (e) => {
      down.set(e.pointerId, { p: at(e), moved: false });
      if (down.size === 2) {
        const [a, b] = [...down.values()].map((d) => d.p);
        pinch = { d: Math.hypot(a[0] - b[0], a[1] - b[1]) || 1, k: this.view.k };
      }
    });
    this.svg.addEventListener("pointermove", (e) => {
      const d = down.get(e.pointerId);
      if (!d) return;
      const p = at(e),
        dx = p[0] - d.p[0],
        dy = p[1] - d.p[1];
      if (!d.moved && Math.hypot(dx, dy) < 4) return;
      if (!d.moved) this.svg.setPointerCapture(e.pointerId); // a drag, not a tap
      d.moved = true;
      d.p = p;
      if (pinch && down.size === 2) {
        const [a, b] = [...down.values()].map((v) => v.p);
        const dist = Math.hypot(a[0] - b[0], a[1] - b[1]);
        this.zoom(
          (pinch.k * dist) / pinch.d / this.view.k,
          (a[0] + b[0]) / 2,
          (a[1] + b[1]) / 2,
        );
      } else if (down.size === 1) this.pan(dx, dy);
    });
    const up = (e) => {
      down.delete(e.pointerId);
      pinch = null;
    };
    this.svg.addEventListener("pointerup", up);
    this.svg.addEventListener("pointercancel", up);
  }
  zoom(f, cx, cy) {
    const v = this.view,
      k = Math.min(K_MAX, Math.max(K_MIN, v.k * f));
    v.x = cx - ((cx - v.x) * k) / v.k;
    v.y = cy - ((cy - v.y) * k) / v.k;
    v.k = k;
    this.apply();
  }
  pan(dx, dy) {
    this.view.x += dx;
    this.view.y += dy;
    this.apply();
  }
  apply() {
    // keep some of the graph in sight: no panning into the void
    const v = this.view,
      L = this.layoutOf(""),
      b = this.svg.getBoundingClientRect();
    const w = L.w * v.k,
      h = L.h * v.k,
      m = 40;
    v.x = Math.min(Math.max(v.x, m - w), Math.max(b.width - m, m));
    v.y = Math.min(Math.max(v.y, m - h), Math.max(b.height - m, m));
    this.layer.setAttribute("transform", `translate(${v.x},${v.y}) scale(${v.k})`);
  }
  // The whole graph if it fits at a legible scale; else at scale K_MIN with the
  // module just toggled (or the top of the graph) in sight.
  fit(focus) {
    const b = this.svg.getBoundingClientRect(),
      L = this.layoutOf("");
    if (b.width < 40) return;
    const whole = Math.min(1.5, (b.width - 20) / L.w, (b.height - 20) / L.h);
    const k = Math.max(K_MIN, whole);
    const x = L.w * k <= b.width ? (b.width - L.w * k) / 2 : 10;
    const y = L.h * k <= b.height ? (b.height - L.h * k) / 2 : 10;
    this.view = { k, x, y };
    this.apply();
    const n = focus === undefined ? null : this.nodes.get(`m:${focus}`);
    if (!n || whole >= K_MIN) return;
    // the module, under the head of the module holding it when both fit
    const dot = focus.lastIndexOf("."),
      own = this.itemBox(n);
    const up = dot > 0 ? this.nodes.get(`m:${focus.slice(0, dot)}`) : null;
    const outer = up ? this.itemBox(up) : own;
    const box = own.bottom - outer.top <= b.height - 20 ? outer : own;
    const left = own.left - b.left,
      top = box.top - b.top;
    const v = this.view; // then no more empty room past the graph than needed
    if (L.w * k > b.width)
      // centred if it is narrow enough, else its left edge
      v.x = Math.max(
        v.x + (own.width < b.width - 20 ? (b.width - own.width) / 2 : 10) - left,
        b.width - 10 - L.w * k,
      );
    if (L.h * k > b.height) v.y = Math.max(v.y + 10 - top, b.height - 10 - L.h * k);
    this.apply();
  }
  itemBox(head) {
    // a module's box on screen: its group's, when it is open
    const g = head.classList.contains("cp-node--head") ? head.parentNode : head;
    return g.getBoundingClientRect();
  }
  onKey(e) {
    if (e.target === this.search) return;
    const k = e.key,
      step = 60,
      b = this.svg.getBoundingClientRect();
    const mid = [b.width / 2, b.height / 2];
    const acts = {
      "/": () => this.search.focus(),
      "+": () => this.zoom(1.25, ...mid),
      "=": () => this.zoom(1.25, ...mid),
      "-": () => this.zoom(0.8, ...mid),
      0: () => this.fit(),
      e: () => this.expandAll(),
      c: () => this.collapseAll(),
      ArrowLeft: () => this.pan(step, 0),
      ArrowRight: () => this.pan(-step, 0),
      ArrowUp: () => this.pan(0, step),
      ArrowDown: () => this.pan(0, -step),
    };
    if (acts[k] && !e.target.matches("select")) {
      e.preventDefault();
      acts[k]();
    }
  }

  toggle(id) {
    if (this.expanded.has(id)) {
      for (const m of [...this.expanded])
        if (m === id || m.startsWith(`${id}.`)) {
          this.expanded.delete(m);
          this.cache.delete(m);
        }
    } else this.expanded.add(id);
    this.dirty(id);
    this.render(id);
    this.fit(id); // the graph changed size: refit, the toggled module in sight
  }
  dirty(id) {
    // the module and every module above it: their layouts hold its size
    for (const m of [...this.cache.keys()])
      if (m === "" || `${id}.`.startsWith(`${m}.`)) this.cache.delete(m);
  }
  expandAll() {
    for (const id of this.model.used) this.expanded.add(id);
    this.cache.clear();
    this.render();
    this.fit();
  }
  collapseAll() {
    this.expanded = new Set([""]);
    this.cache.clear();
    this.render();
    this.fit();
  }

  // items of an expanded module: its used child modules and its own ops
  layoutOf(id) {
    if (this.cache.has(id)) return this.cache.get(id);
    const M = this.model,
      m = M.mods.get(id);
    const g = new dagre.graphlib.Graph({ multigraph: false });
    g.setGraph({ rankdir: "TB", nodesep: 14, ranksep: 22, marginx: PAD, marginy: PAD });
    g.setDefaultEdgeLabel(() => ({}));
    for (const k of m.kids) {
      if (!M.used.has(k)) continue;
      const size = this.expanded.has(k)
        ? this.layoutOf(k)
        : { w: this.boxWidth(k), h: BOX_H };
      g.setNode(`m:${k}`, { width: size.w, height: size.h });
    }
    for (const o of m.ops)
      g.setNode(`o:${o}`, {
        width: Math.max(70, this.textWidth(this.opLabel(o)) + 18),
        height: OP_H,
      });
    const tensors = new Map();
    for (const [u, v] of M.edgesAt.get(id) || []) {
      const a = M.childKey(id, u),
        b = M.childKey(id, v);
      if (a === b) continue;
      const key = `${a}\u0000${b}`;
      if (!tensors.has(key)) tensors.set(key, new Set());
      tensors.get(key).add(u);
    }
    for (const [key, us] of tensors) {
      const [a, b] = key.split("\u0000"),
        first = M.ops.get([...us][0]).out[0];
      const label = first ? first.shape.join("×") : "";
      g.setEdge(a, b, {
        width: this.textWidth(label, TEXT_MIN) + 4,
        height: TEXT_MIN + 3,
        label,
        tensors: [...us],
      });
    }
    const t0 = performance.now();
    dagre.layout(g);
    this.timing.layout += performance.now() - t0;
    const L = {
      w: g.graph().width || 80,
      h: (g.graph().height || 40) + HEAD,
      items: [],
      edges: [],
    };
    for (const k of g.nodes()) {
      const n = g.node(k);
      L.items.push({
        key: k,
        x: n.x - n.width / 2,
        y: n.y - n.height / 2 + HEAD,
        w: n.width,
        h: n.height,
      });
    }
    for (const e of g.edges()) {
      const d = g.edge(e);
      L.edges.push({
        from: e.v,
        to: e.w,
        points: d.points.map((p) => [p.x, p.y + HEAD]),
        label: d.label,
        lx: d.x,
        ly: d.y + HEAD,
        tensors: d.tensors,
      });
    }
    this.cache.set(id, L);
    return L;
  }
  boxWidth(k) {
    const title = this.textWidth(this.title(k, "▸")) + 14; // room for the DP dot
    return Math.max(110, title, this.textWidth(this.subtitle(k), TEXT_MIN)) + 18;
  }
  textWidth(text, px) {
    return measure(text, px || TEXT, this.family);
  }
  title(k, mark) {
    // a shared module is drawn once, with each name it has
    const m = this.model.mods.get(k),
      names = [m.name, ...(m.aliases || [])];
    const held = this.overlay.experts.get(k); // an expert: the EP rank holding it
    const ep = held ? ` · EP rank ${held.rank} of ${this.overlay.d.ep}` : "";
    return `${mark} ${names.join(" = ")} · ${m.type}${ep}`;
  }
  subtitle(k) {
    const m = this.model.mods.get(k);
    return `${num(m.params)} params · ${num(m.flops)} FLOPs${this.badge(k)}`;
  }
  opLabel(o) {
    const op = this.model.ops.get(o); // an input by its name: src, tgt, tgt_mask
    const name = op.op === "input" ? op.id : op.op.replace(/^aten\./, "");
    return op.out[0] && op.op !== "output"
      ? `${name} ${op.out[0].shape.join("×")}`
      : name;
  }

  redraw() {
    // new degrees (or the first picture): badges change widths and classes
    const t0 = performance.now();
    this.cache.clear();
    this.views.clear();
    this.overlay = this.computeOverlay();
    this.rankTable();
    this.keyTo();
    this.render();
    this.root.dataset.renderMs = (performance.now() - t0).toFixed(2);
  }
  render(focusId) {
    const t0 = performance.now();
    this.timing.layout = 0;
    const V = this.sync("");
    if (this.layer.firstChild !== V.el) this.layer.replaceChildren(V.el);
    this.nodes = new Map();
    this.collect("");
    this.root.dataset.renderMs = (performance.now() - t0).toFixed(2);
    this.root.dataset.layoutMs = this.timing.layout.toFixed(2);
    this.mark();
    const n = focusId === undefined ? null : this.nodes.get(`m:${focusId}`);
    if (n) n.focus({ preventScroll: true }); // no scroll: no forced layout
  }
  // A module's drawing (its view) lives as long as the module is open, in its own
  // coordinates; each item is a group placed by a transform. A new layout of the
  // module moves the items it already drew (a transform, a box's size), draws only
  // the items that opened or closed, and redraws its own edges. Views whose layout
  // is unchanged are left alone: the browser restyles only what changed.
  sync(id) {
    const L = this.layoutOf(id);
    let V = this.views.get(id);
    if (V && V.L === L) return V;
    if (!V) {
      V = { el: make("g", {}), items: new Map(), nodes: new Map(), edges: null };
      this.views.set(id, V);
    }
    V.L = L;
    V.groups = [];
    for (const it of L.items) {
      const isMod = it.key.startsWith("m:"),
        key = it.key.slice(2);
      const open = isMod && this.expanded.has(key);
      let d = V.items.get(it.key);
      if (!d || d.open !== open) {
        const old = d;
        d = open ? this.group(it, key, V.nodes) : this.node(it, isMod, key, V.nodes);
        V.items.set(it.key, d);
        if (old) {
          old.el.replaceWith(d.el);
          if (old.open) this.drop(key);
        } else V.el.insertBefore(d.el, V.edges);
      }
      this.place(d, it);
      if (open) {
        V.groups.push(key);
        this.sync(key);
      }
    }
    const edges = this.edges(L); // above the group boxes
    if (V.edges) V.edges.replaceWith(edges);
    else V.el.appendChild(edges);
    V.edges = edges;
    return V;
  }
  drop(id) {
    // a closed module's views, its own and those below it
    for (const k of [...this.views.keys()])
      if (k === id || k.startsWith(`${id}.`)) this.views.delete(k);
  }
  place(d, it) {
    const t = `translate(${it.x},${it.y})`;
    if (d.t !== t) {
      d.t = t;
      d.el.setAttribute("transform", t);
    }
    if (d.open && (d.w !== it.w || d.h !== it.h)) {
      Object.assign(d, { w: it.w, h: it.h });
      d.box.setAttribute("width", it.w);
      d.box.setAttribute("height", it.h);
      d.head.setAttribute("width", it.w);
      d.ep.forEach((mk, i) => {
        mk.setAttribute("transform", `translate(${it.w / 2},${i * it.h})`);
      }); // dispatch on top, combine below
    }
  }
  collect(id) {
    const V = this.views.get(id);
    for (const [k, g] of V.nodes) this.nodes.set(k, g);
    for (const k of V.groups) this.collect(k);
  }
  group(it, key, nodes) {
    const el = make("g", { class: `cp-group ${this.ownClass(key, true)}` });
    const box = make("rect", { x: 0, y: 0, rx: 6, class: "cp-group__box" }, el);
    const head = make(
      "g",
      {
        class: "cp-node cp-node--head",
        tabindex: 0,
        role: "button",
        "aria-expanded": "true",
        "data-id": key,
      },
      el,
    );
    const bar = make(
      "rect",
      { x: 0, y: 0, height: HEAD - 4, rx: 6, class: "cp-group__head" },
      head,
    );
    const title = this.title(key, "▾");
    make("text", { x: 8, y: 15 }, head, title);
    this.dpMark(head, key, true, this.textWidth(title) + 18, 10);
    this.bind(head, `m:${key}`, nodes);
    el.appendChild(this.sync(key).el);
    const ep = this.epMarks(el, key, true, it.w, it.h);
    return { el, open: true, box, head: bar, ep };
  }
  node(it, isMod, key, nodes) {
    const cls = isMod ? "cp-node cp-node--module" : "cp-node cp-node--op";
    const g = make("g", {
      class: `${cls} ${this.ownClass(key, isMod)}`,
      tabindex: 0,
      role: "button",
      "data-id": key,
    });
    make("rect", { x: 0, y: 0, width: it.w, height: it.h, rx: isMod ? 6 : 12 }, g);
    if (isMod) {
      g.setAttribute("aria-expanded", "false"); // its name is its text, as shown
      make("text", { x: 8, y: 18 }, g, this.title(key, "▸"));
      make("text", { x: 8, y: 35, class: "cp-node__sub" }, g, this.subtitle(key));
      this.dpMark(g, key, false, it.w, 0); // on the corner
      this.epMarks(g, key, false, it.w, it.h);
    } else make("text", { x: 9, y: 19 }, g, this.opLabel(key));
    this.bind(g, (isMod ? "m:" : "o:") + key, nodes);
    return { el: g, open: false };
  }
  edges(L) {
    const M = this.model,
      edges = make("g", { class: "cp-edges" });
    for (const e of L.edges) {
      const pts = e.points;
      const d = `M${pts.map((p) => p.join(",")).join(" L")}`;
      const coll = e.tensors
        .flatMap((u) => this.overlay.at.get(u) || [])
        .filter((c) => c.kind !== "dp" && c.kind !== "ep"); // those mark modules
      const path = make(
        "path",
        {
          d,
          class: `cp-edge${
            coll.length ? ` cp-edge--coll cp-kind-${coll[0].kind}` : ""
          }`,
        },
        edges,
      );
      make(
        "title",
        {},
        path,
        e.tensors.map((u) => `${u}: ${shape(M.ops.get(u).out[0])}`).join("\n"),
      );
      const at = { x: e.lx, y: e.ly + 4, class: "cp-edge__label" };
      if (e.label) make("text", at, edges, e.label);
      if (coll.length) {
        const [mx, my] = pts[Math.floor(pts.length / 2)];
        const colls = coll.map((c) => [c.at, c.kind, c.name, c.bytes]);
        const mk = make(
          "g",
          {
            class: `cp-coll cp-kind-${coll[0].kind}`,
            "data-colls": JSON.stringify(colls),
          },
          edges,
        );
        make("circle", { cx: mx, cy: my, r: 7 }, mk);
        make(
          "text",
          { x: mx + 10, y: my + 4 },
          mk,
          coll.map((c) => `${c.kind.toUpperCase()} ${c.name}`).join(", "),
        );
        make(
          "title",
          {},
          mk,
          coll
            .map(
              (c) =>
                `${c.kind.toUpperCase()} ${c.name}: ` +
                `${bytes(c.bytes)} sent per rank a step`,
            )
            .join("\n"),
        );
      }
    }
    return edges;
  }
  bind(g, key, nodes) {
    nodes.set(key, g);
    const show = () => this.info(key);
    g.addEventListener("mouseenter", show);
    g.addEventListener("focus", show);
    g.addEventListener("click", (e) => {
      e.stopPropagation();
      show();
      if (key.startsWith("m:")) this.toggle(key.slice(2));
    });
    g.addEventListener("keydown", (e) => {
      if ((e.key === "Enter" || e.key === " ") && key.startsWith("m:")) {
        e.preventDefault();
        e.stopPropagation();
        this.toggle(key.slice(2));
      }
    });
  }

  // parallelism: stage colour, TP role, ZeRO-3 shard; collectives by where they fire
  computeOverlay() {
    const g = this.model.g;
    const wrong = O.checkDegrees(g, this.degrees); // drawn at ep 1 until ep fits
    const d = wrong ? { ...this.degrees, ep: 1 } : { ...this.degrees };
    if (this.epError) {
      this.epError.textContent = wrong ? `${wrong}; drawn at ep = 1` : "";
      this.epField.setAttribute("aria-invalid", String(Boolean(wrong)));
    }
    const colls = O.collectives(g, d),
      at = new Map();
    for (const c of colls) {
      if (!at.has(c.at)) at.set(c.at, []);
      at.get(c.at).push(c);
    }
    const stages = new Map(),
      n = g.stack.length; // module or op → stages it runs on
    for (const op of this.model.ops.values()) {
      const s = O.stage(op.layer, d.pp, n);
      for (const k of op.chain.map((c) => `m:${c}`).concat([`o:${op.id}`])) {
        if (!stages.has(k)) stages.set(k, new Set());
        stages.get(k).add(s);
      }
    }
    const dp = O.dpMarkers(g, d); // module → DP/ZeRO marker (overlay_dp.py)
    // EP: a mixture's two all-to-alls, drawn on its box while it is collapsed and on
    // its experts' box once it is open; each expert, the EP rank that holds it
    const ep = new Map(),
      experts = new Map();
    for (const moe of d.ep > 1 ? O.mixtures(g) : []) {
      const colls = at.get(moe.id).filter((c) => c.kind === "ep");
      const n = moe.moe.experts.length;
      const list = this.model.mods.get(moe.moe.experts[0]).parent;
      ep.set(moe.id, { colls, list: false }).set(list, { colls, list: true });
      moe.moe.experts.forEach((id, i) => {
        experts.set(id, { index: i, of: n, rank: O.epRank(i, n, d.ep) });
      });
    }
    const on = d.dp * d.tp * d.pp * d.cp > 1;
    return { d, colls, at, stages, dp, ep, experts, on };
  }
  stagesOf(key, isMod) {
    return this.overlay.stages.get((isMod ? "m:" : "o:") + key) || new Set([0]);
  }
  ownClass(key, isMod) {
    if (!this.overlay.on) return "";
    const s = this.stagesOf(key, isMod),
      m = isMod ? this.model.mods.get(key) : null;
    const d = this.overlay.d;
    let c = s.size === 1 ? `cp-stage-${[...s][0] % STAGES}` : "cp-stage-mixed";
    if (m?.tp && d.tp > 1) c += ` cp-tp-${m.tp}`;
    if (m?.params && d.zero === 3 && d.dp > 1) c += " cp-zero3";
    if (m && this.overlay.experts.has(key)) c += " cp-ep-expert";
    return c;
  }
  badge(key) {
    const m = this.model.mods.get(key),
      d = this.overlay.d;
    let b = "";
    if (m.tp && d.tp > 1) b += ` · TP ${m.tp} ÷${d.tp}`;
    if (m.params && d.zero === 3 && d.dp > 1) b += ` · ZeRO-3 ÷${d.dp}`;
    const dp = this.overlay.dp.get(key);
    if (dp) b += ` · DP ${bytes(dp.bytes)}`;
    return b;
  }
  // a module's DP/ZeRO marker, drawn like an edge's: a dot with its tooltip
  dpMark(parent, key, own, x, y) {
    const dp = this.overlay.dp.get(key),
      sent = dp && (own ? dp.own : dp.bytes);
    if (!sent) return;
    const mk = make(
      "g",
      {
        class: "cp-coll cp-kind-dp",
        "data-colls": JSON.stringify([[key, "dp", dp.name, sent]]),
      },
      parent,
    );
    make("circle", { cx: x, cy: y, r: 6 }, mk);
    const z = this.overlay.d.zero;
    const lines = [
      `${z ? `ZeRO-${z}` : "DP"} over ${dp.group} ` +
        `ranks, ${own ? "its own parameters" : "its parameters and those below"}: ` +
        `${bytes(sent)} ` +
        "sent per rank a step",
    ];
    if (!own)
      for (const p of dp.parts)
        lines.push(
          `${p.collective.replace("_", "-")} ` +
            `${p.of} ${p.when}: ${p.calls} calls, ${bytes(p.payload)} in all, ` +
            `${bytes(p.bytes)} sent`,
        );
    if (!own && dp.stages.size > 1)
      for (const [s, v] of dp.stages)
        lines.push(`stage ${s}: ${bytes(v)} per rank of the stage`);
    make("title", {}, mk, lines.join("\n"));
  }
  // a mixture's two all-to-alls, on the box where tokens enter it and leave it
  epMarks(parent, key, open, w, h) {
    const here = this.overlay.ep.get(key);
    if (!here || (open && !here.list)) return []; // an open mixture: on its experts
    return here.colls.map((c, i) => {
      const mk = make(
        "g",
        {
          class: "cp-coll cp-kind-ep",
          "aria-hidden": "true",
          transform: `translate(${w / 2},${i * h})`,
          "data-colls": JSON.stringify([[c.at, c.kind, c.name, c.bytes]]),
        },
        parent,
      );
      make("circle", { cx: 0, cy: 0, r: 6 }, mk);
      make("text", { x: 10, y: 4 }, mk, `EP ${c.name.split(":")[0]}`);
      make(
        "title",
        {},
        mk,
        `EP ${c.name}, over ${c.group} ranks: ` +
          `${bytes(c.bytes)} sent per rank a step`,
      );
      return mk;
    });
  }

  info(key) {
    const M = this.model,
      p = this.panel;
    const d = this.overlay.d;
    p.textContent = "";
    const row = (k, v) => {
      const r = html("div", "", p);
      html("b", "", r, `${k}: `);
      html("span", "", r, v);
    };
    let layer;
    if (key.startsWith("m:")) {
      const m = M.mods.get(key.slice(2));
      html("div", "cp-viewer__title", p, `${m.id || "(model)"} · ${m.type}`);
      if (m.aliases) row("also named", `${m.aliases.join(", ")} (one module, shared)`);
      row("parameters", `${num(m.params)} (${bytes(m.bytes)})`);
      row("FLOPs (forward)", num(m.flops));
      for (const t of m.tensors)
        row(
          `${t.kind} ${t.name}`,
          `${t.shape.join("×")} ${t.dtype}, ${bytes(t.bytes)}`,
        );
      if (m.tp) row("tensor parallel", m.tp);
      layer = m.layer;
      for (const c of this.overlay.at.get(m.id) || [])
        row(`${c.kind.toUpperCase()} ${c.name}`, `${bytes(c.bytes)} sent per rank`);
      const dp = this.overlay.dp.get(m.id);
      if (dp && dp.bytes !== dp.own)
        row(`DP ${dp.name}, all below`, `${bytes(dp.bytes)} sent per rank`);
      const ep = this.overlay.ep.get(m.id);
      if (ep?.list)
        for (const c of ep.colls)
          row(`EP ${c.name}`, `${bytes(c.bytes)} sent per rank`);
      const held = this.overlay.experts.get(m.id);
      if (held)
        row(
          "expert parallel",
          `expert ${held.index} of ${held.of}, held ` +
            `by EP rank ${held.rank} of ${d.ep} (dp rank mod ${d.ep} = ${held.rank})`,
        );
    } else {
      const op = M.ops.get(key.slice(2));
      html("div", "cp-viewer__title", p, `${op.op} · ${op.module || "(model)"}`);
      for (const u of op.inputs)
        if (M.ops.has(u)) row(`in ${u}`, shape(M.ops.get(u).out[0]));
      op.out.forEach((o, i) => {
        if (o) row(`out ${i}`, `${shape(o)}, ${bytes(o.bytes)}`);
      });
      row("FLOPs", num(op.flops));
      layer = op.layer;
      for (const c of this.overlay.at.get(op.id) || [])
        row(`${c.kind.toUpperCase()} ${c.name}`, `${bytes(c.bytes)} sent per rank`);
    }
    if (this.overlay.on && !(key === "m:")) {
      const s = O.stage(layer, d.pp, M.g.stack.length);
      const m = key.startsWith("m:") ? M.mods.get(key.slice(2)) : null;
      if (m?.expert && d.ep > 1) {
        // only the ranks at its EP rank hold it
        const r = O.epRank(m.expert.index, m.expert.of, d.ep);
        row(
          "owner ranks",
          `stage ${s}, EP rank ${r}: ${O.ranksOfEpRank(s, r, d).join(", ")}`,
        );
      } else row("owner ranks", `stage ${s}: ${O.ranksOfStage(s, d).join(", ")}`);
    }
  }
  hint() {
    this.panel.textContent =
      "Hover, focus or tap a node: its shapes, parameters " + "and FLOPs show here.";
  }
  // what the overlay's fills, borders and dots mean, for the degrees picked
  keyTo() {
    const k = this.legend,
      ov = this.overlay,
      d = ov.d;
    k.textContent = "";
    if (!ov.on) return;
    const item = (cls, label, dot) => {
      const it = html("span", "cp-viewer__keyitem", k);
      const sw = make("svg", { width: 22, height: 14, "aria-hidden": "true" }, it);
      if (dot)
        make(
          "circle",
          { cx: 11, cy: 7, r: 5 },
          make("g", { class: `cp-viewer__swatch ${cls}` }, sw),
        );
      else
        make(
          "rect",
          { x: 1, y: 1, width: 20, height: 12, rx: 3 },
          make("g", { class: `cp-viewer__swatch ${cls}` }, sw),
        );
      html("span", "", it, label);
    };
    for (let s = 0; s < d.pp; s++) item(`cp-stage-${s % STAGES}`, `stage ${s}`);
    if (d.pp > 1) item("cp-stage-mixed", "on several stages");
    if (d.tp > 1) {
      item("cp-tp-column", "TP column split");
      item("cp-tp-row", "TP row split");
    }
    if (d.zero === 3 && d.dp > 1) item("cp-zero3", "ZeRO-3 sharded");
    if (ov.experts.size) item("cp-ep-expert", "expert, on the EP rank its box names");
    const kinds = new Set(ov.colls.map((c) => c.kind));
    for (const [kind, label] of [
      ["tp", "TP collective"],
      ["pp", "PP send/recv"],
      ["cp", "CP ring"],
      ["dp", d.zero ? "ZeRO collective" : "DP all-reduce"],
      ["ep", "EP all-to-all: dispatch above the experts, combine below"],
    ])
      if (kinds.has(kind)) item(`cp-kind-${kind}`, label, true);
  }
  rankTable() {
    const t = this.table,
      d = this.overlay.d;
    t.textContent = "";
    const rows = O.rankBytes(this.model.g, d);
    const tab = html("table", "cp-viewer__table", t);
    const head = html("tr", "", html("thead", "", tab));
    const cols = [
      "weights",
      "grads",
      "optimizer",
      "buffers",
      "total",
      "tp",
      "pp",
      "cp",
      "dp",
    ];
    if (O.mixtures(this.model.g).length) cols.push("ep"); // a model with experts
    for (const c of [
      "stage",
      "ranks",
      ...cols.slice(0, 5),
      ...cols.slice(5).map((c) => `${c.toUpperCase()} sent`),
    ])
      html("th", "", head, c).scope = "col";
    const body = html("tbody", "", tab);
    for (const r of rows) {
      const tr = html("tr", "", body);
      html("td", "", tr, String(r.stage));
      html(
        "td",
        "",
        tr,
        r.ranks.length > 8 ? `${r.ranks.slice(0, 8).join(",")},…` : r.ranks.join(","),
      );
      for (const c of cols) {
        const td = html("td", "", tr, bytes(r[c]));
        td.dataset.col = c;
        td.dataset.bytes = String(r[c]);
      }
    }
    html(
      "p",
      "cp-viewer__note",
      t,
      "Bytes per rank, the sizing calculator's: weights, " +
        "gradients, Adam state, ZeRO-3's gathered block (no activations); sent: bytes a " +
        "rank sends in one step of one micro-batch (nccl-tests' bus factors; PP: both " +
        "directions over the boundary to the next stage)." +
        (cols.includes("ep")
          ? " A rank holds E/ep of each mixture's experts; EP: the dispatch and " +
            "combine all-to-alls, forward and backward, at uniform routing."
          : ""),
    );
  }

  find(q) {
    q = q.trim().toLowerCase();
    this.matches = new Set();
    if (q) {
      for (const m of this.model.mods.values())
        if (
          m.id &&
          this.model.used.has(m.id) &&
          (m.id.toLowerCase().includes(q) || m.type.toLowerCase().includes(q))
        )
          this.matches.add(`m:${m.id}`);
      for (const o of this.model.ops.values())
        if (o.op.toLowerCase().includes(q) || o.id.toLowerCase().includes(q))
          this.matches.add(`o:${o.id}`);
      let opened = 0;
      for (const k of this.matches) {
        if (opened > 200) break;
        const chain = k.startsWith("o:")
          ? this.model.ops.get(k.slice(2)).chain
          : [""].concat(
              k
                .slice(2)
                .split(".")
                .slice(0, -1)
                .map((_, i, a) => a.slice(0, i + 1).join(".")),
            );
        for (const c of chain)
          if (!this.expanded.has(c)) {
            this.expanded.add(c);
            this.dirty(c);
            opened++;
          }
      }
    }
    this.cursor = -1;
    this.render();
    this.found.textContent = q ? `${this.matches.size} found` : "";
  }
  mark() {
    for (const [k, g] of this.nodes)
      g.classList.toggle("cp-match", this.matches.has(k));
  }
  next() {
    const shown = [...this.matches].filter((k) => this.nodes.has(k));
    if (!shown.length) return;
    this.cursor = (this.cursor + 1) % shown.length;
    const b = this.nodes.get(shown[this.cursor]).getBoundingClientRect();
    const s = this.svg.getBoundingClientRect(); // nested groups: screen boxes
    this.view.x += s.left + s.width / 2 - (b.left + b.width / 2);
    this.view.y += s.top + s.height / 2 - (b.top + b.height / 2);
    this.apply();
    this.info(shown[this.cursor]);
  }
}

function start() {
  for (const fig of document.querySelectorAll(
    "figure.cp-viewer:not(.cp-viewer--ready)",
  )) {
    const data = fig.querySelector("script.cp-viewer__graph");
    const first = fig.querySelector("script.cp-viewer__start");
    const graph = data ? JSON.parse(data.textContent) : window.MODEL_GRAPH;
    const start = first ? JSON.parse(first.textContent) : window.MODEL_VIEW_START;
    if (graph) fig.viewer = new Viewer(fig, graph, start);
    fig.dataset.readyMs = performance.now().toFixed(1); // since navigation start
  }
}
start(); // a module runs once the page is parsed
