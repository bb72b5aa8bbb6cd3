/* The animation player: draws the frames of an executed trace, one step at a time.

   Each <figure class="cp-player"> holds its animation as JSON in a
   <script type="application/json" class="cp-player__trace">, written by
   snippets/comm/trace_frames.py from a run (so it works from file:// too). A frame has
   every rank's buffer, element by element, as the ranks whose inputs the element holds
   summed so far, and the messages of that step. A rank's buffer is a row of cells; a
   cell names its ranks ("0–2,4") and colours one stripe per rank it holds. The step's
   messages are arrows from row to row, solid where the receiver adds, dashed where it
   copies, dotted and crossed where the send was posted and never matched ("blocked"),
   with their bytes. An empty cell ([]) is a piece not yet there; a frame's own
   "values" (recorded by the run) replace the sums of the inputs; "slots" names the
   columns, drawn over them where they fit; a frame's "stopped" (one line per rank,
   or null) draws those ranks' rows as stopped, with the line beside them.

   Keys (on the figure or its buttons): ← → step, Home End first and last, Space play
   and pause. With prefers-reduced-motion there is no autoplay and no transition. */
import { html, svg } from "../javascripts/dom.js";

const STEP_MS = 1300;
const ROW = 44,
  CELL_H = 32,
  LABEL_W = 46;

const reducedMotion = () =>
  !!window.matchMedia?.("(prefers-reduced-motion: reduce)").matches;

// The same rule as trace_frames.label: [0, 1, 2, 4] → "0–2,4".
function label(cell) {
  const runs = [];
  for (const r of cell) {
    const last = runs[runs.length - 1];
    if (last && r === last[last.length - 1] + 1) last.push(r);
    else runs.push([r]);
  }
  return runs
    .map((g) => (g.length > 2 ? `${g[0]}–${g[g.length - 1]}` : g.join(",")))
    .join(",");
}
const bytes = (b) =>
  b >= 1 << 20
    ? `${(b / (1 << 20)).toFixed(1)} MiB`
    : b >= 1024
      ? `${(b / 1024).toFixed(1)} KiB`
      : `${b} B`;

// A step's messages, one per (src, dst, action): segments of one transfer merge.
function transfers(messages) {
  const byPair = new Map();
  for (const m of messages) {
    const key = `${m.src}>${m.dst}:${m.action}`;
    const t = byPair.get(key) || { ...m, bytes: 0, ranges: [] };
    t.bytes += m.bytes;
    t.ranges.push([m.start, m.stop]);
    byPair.set(key, t);
  }
  return [...byPair.values()];
}

class Player {
  constructor(fig, anim) {
    this.fig = fig;
    this.a = anim;
    this.k = 0;
    this.timer = null;
    this.width = 0;
    const caption = fig.querySelector("figcaption");
    this.view = html("div", "cp-player__view");
    this.status = html("p", "cp-player__status");
    this.status.setAttribute("aria-live", "polite");
    const bar = html("div", "cp-player__controls");
    const button = (text, name, action) => {
      const b = html("button", "cp-player__button", bar, text);
      b.type = "button";
      b.setAttribute("aria-label", name);
      b.title = name;
      b.addEventListener("click", action);
      return b;
    };
    button("«", "First step", () => this.go(0));
    button("‹", "Previous step", () => this.go(this.k - 1));
    this.playButton = button("▶", "Play", () => this.toggle());
    button("›", "Next step", () => this.go(this.k + 1));
    button("»", "Last step", () => this.go(this.a.frames.length - 1));
    this.scrub = html("input", "cp-player__scrub", bar);
    Object.assign(this.scrub, { type: "range", min: 0, step: 1, value: 0 });
    this.scrub.max = String(this.a.frames.length - 1);
    this.scrub.setAttribute("aria-label", "Step");
    this.scrub.addEventListener("input", () => this.go(+this.scrub.value, true));
    const blocked = anim.frames.some((f) =>
      f.messages.some((m) => m.action === "blocked"),
    );
    const legend = html(
      "p",
      "cp-player__legend",
      undefined,
      "solid arrow: added in · dashed: copied over · stripes: ranks summed" +
        (blocked ? " · dotted, crossed: sent, never received" : ""),
    );
    (anim.tints || []).forEach((t) => {
      // a key for the cells' fills, if any
      const item = html("span", "cp-player__key", legend, " · ");
      html("span", "cp-player__swatch", item).style.background = t.color;
      item.append(` ${t.name}`);
    });
    for (const e of [this.view, this.status, bar, legend]) fig.insertBefore(e, caption);
    fig.tabIndex = 0; // a figure with a caption keeps its role: named, not a group
    fig.setAttribute("aria-label", `Animation: ${this.a.title || "trace"}`);
    fig.addEventListener("keydown", (e) => this.key(e));
    this.draw();
    if (window.ResizeObserver) {
      new ResizeObserver(() => {
        if (Math.abs(this.fig.clientWidth - this.width) > 1) this.draw();
      }).observe(fig);
    }
    if (!reducedMotion() && window.IntersectionObserver) {
      const seen = new IntersectionObserver(
        (entries) => {
          if (entries.some((e) => e.isIntersecting)) {
            seen.disconnect();
            if (this.k === 0) this.play();
          }
        },
        { threshold: 0.5 },
      );
      seen.observe(fig);
    }
  }

  key(e) {
    if (e.target === this.scrub && e.key.startsWith("Arrow")) return; // the range's own
    const last = this.a.frames.length - 1;
    const to = {
      ArrowRight: this.k + 1,
      ArrowDown: this.k + 1,
      ArrowLeft: this.k - 1,
      ArrowUp: this.k - 1,
      Home: 0,
      End: last,
    }[e.key];
    if (to !== undefined) {
      this.go(to);
    } else if (e.key === " " && e.target.tagName !== "BUTTON") {
      this.toggle();
    } else {
      return;
    }
    e.preventDefault();
  }

  go(k, fromScrub) {
    if (!fromScrub) this.pause();
    this.k = Math.max(0, Math.min(this.a.frames.length - 1, k));
    this.draw();
  }

  play() {
    if (this.timer) return;
    if (this.k >= this.a.frames.length - 1) this.go(0);
    this.timer = setInterval(() => {
      if (this.k >= this.a.frames.length - 1) return this.pause();
      this.k += 1;
      this.draw();
      if (this.k >= this.a.frames.length - 1) this.pause();
    }, STEP_MS);
    this.playButton.textContent = "❚❚";
    this.playButton.setAttribute("aria-label", "Pause");
    this.playButton.title = "Pause";
    this.fig.dataset.playing = "true";
  }

  pause() {
    clearInterval(this.timer);
    this.timer = null;
    this.playButton.textContent = "▶";
    this.playButton.setAttribute("aria-label", "Play");
    this.playButton.title = "Play";
    this.fig.dataset.playing = "false";
  }

  toggle() {
    if (this.timer) this.pause();
    else this.play();
  }

  draw() {
    const a = this.a,
      frame = a.frames[this.k],
      prev = a.frames[this.k - 1];
    const p = a.ranks,
      n = a.numel;
    this.width = this.fig.clientWidth;
    const W = Math.max(280, Math.min(this.width || 340, 760));
    const moves = transfers(frame.messages);
    const far = Math.max(1, ...moves.map((m) => Math.abs(m.src - m.dst)));
    const arcW = Math.min(110, 44 + 11 * far);
    const cw = Math.min(84, (W - LABEL_W - arcW) / n);
    const right = LABEL_W + cw * n;
    // column names only where every one fits at the cells' width
    const heads = a.slots && Math.max(...a.slots.map((t) => t.length)) * 6.2 < cw - 2;
    const TOP = heads ? 20 : 6;
    const H = TOP + ROW * p;
    const root = svg("svg", {
      width: W,
      height: H,
      viewBox: `0 0 ${W} ${H}`,
      class: "cp-player__svg",
      role: "img",
    });
    svg("title", {}, root, frame.label);
    const defs = svg("defs", {}, root);
    this.markerId =
      this.markerId || `cp-player-head-${Math.random().toString(36).slice(2, 9)}`;
    const head = svg(
      "marker",
      {
        id: this.markerId,
        viewBox: "0 0 8 8",
        refX: 7,
        refY: 4,
        markerWidth: 7,
        markerHeight: 7,
        orient: "auto-start-reverse",
      },
      defs,
    );
    svg("path", { d: "M0,0 L8,4 L0,8 z", class: "cp-player__head" }, head);
    if (heads) {
      a.slots.forEach((t, i) => {
        const at = { x: LABEL_W + (i + 0.5) * cw, y: 12, "text-anchor": "middle" };
        svg("text", { ...at, class: "cp-player__slot" }, root, t);
      });
    }

    for (let r = 0; r < p; r++) {
      const y = TOP + r * ROW;
      svg(
        "text",
        { x: 0, y: y + CELL_H / 2 + 4, class: "cp-player__rank" },
        root,
        `rank ${r}`,
      );
      const halt = frame.stopped?.[r];
      if (halt) {
        const t = svg(
          "text",
          { x: LABEL_W + cw * n + 6, y: y + CELL_H / 2 + 4, class: "cp-player__halt" },
          root,
          halt,
        );
        const room = W - (LABEL_W + cw * n + 6) - 2;
        if (halt.length * 6.2 > room) {
          t.setAttribute("textLength", String(room));
          t.setAttribute("lengthAdjust", "spacingAndGlyphs");
        }
      }
      for (let i = 0; i < n; i++) {
        const cell = frame.cells[r][i],
          text = label(cell);
        const changed = prev && label(prev.cells[r][i]) !== text;
        const value = frame.values
          ? frame.values[r][i]
          : cell.length
            ? cell.reduce((s, q) => s + a.inputs[q][i], 0)
            : null;
        const g = svg(
          "g",
          {
            class:
              "cp-player__cell" +
              (changed ? " cp-player__cell--new" : "") +
              (cell.length ? "" : " cp-player__cell--empty") +
              (halt ? " cp-player__cell--stopped" : ""),
            "data-rank": r,
            "data-slot": i,
            "data-label": text,
            "data-value": value === null ? "" : String(value),
          },
          root,
        );
        const x = LABEL_W + i * cw;
        const what = a.slots ? a.slots[i] : `element ${i}`;
        // an optional fill from a key (anim.tints), and the words a cell shows
        const tint = frame.tints ? frame.tints[r][i] : null;
        const shown = frame.text ? frame.text[r][i] : text;
        const named =
          tint === null || tint === undefined ? "" : `, ${a.tints[tint].name}`;
        svg(
          "title",
          {},
          g,
          `rank ${r}, ${what}: ${
            !cell.length
              ? "empty"
              : frame.text
                ? `${shown}${named}`
                : frame.values
                  ? `ranks ${text}, ${value}`
                  : `ranks ${text} summed = ${value}`
          }`,
        );
        const box = svg(
          "rect",
          {
            x: x + 1,
            y,
            width: cw - 2,
            height: CELL_H,
            rx: 3,
            class: "cp-player__box",
          },
          g,
        );
        if (named)
          Object.assign(box.style, { fill: a.tints[tint].color, fillOpacity: 0.4 });
        const t = svg(
          "text",
          {
            x: x + cw / 2,
            y: y + 14,
            "text-anchor": "middle",
            class: "cp-player__label",
          },
          g,
          shown,
        );
        if (frame.values && value !== null && !frame.text) {
          // recorded: after ranks
          svg("tspan", { class: "cp-player__value" }, t, ` ${value}`);
        }
        if (t.textContent.length * 6.2 > cw - 6) {
          t.setAttribute("textLength", String(cw - 6));
          t.setAttribute("lengthAdjust", "spacingAndGlyphs");
        }
        const sw = (cw - 8) / p;
        for (let q = 0; q < p; q++) {
          const has = cell.includes(q);
          svg(
            "rect",
            {
              x: x + 4 + q * sw,
              y: y + CELL_H - 11,
              width: Math.max(1, sw - 1),
              height: 7,
              fill: has ? a.colors[q] : "none",
              class: has ? "cp-player__stripe" : "cp-player__stripe--empty",
            },
            g,
          );
        }
      }
    }

    const placed = [];
    for (const m of moves) {
      const y1 = TOP + m.src * ROW + CELL_H / 2,
        y2 = TOP + m.dst * ROW + CELL_H / 2;
      const d = Math.abs(m.src - m.dst),
        x0 = right + 3;
      const bulge = 12 + 11 * d + (m.src > m.dst ? 7 : 0);
      const cls = `cp-player__msg cp-player__msg--${m.action}`;
      const g = svg("g", { class: cls, "data-src": m.src, "data-dst": m.dst }, root);
      const stuck = m.action === "blocked";
      svg(
        "path",
        {
          d:
            `M${x0},${y1 - 3} C${x0 + bulge},${y1 - 3} ${x0 + bulge},${y2 + 3}` +
            ` ${x0 + 2},${y2 + 3}`,
          "marker-end": stuck ? "" : `url(#${this.markerId})`,
        },
        g,
      );
      if (stuck) {
        // a cross where it would have arrived
        const cx = x0 + 6,
          cy = y2 + 3;
        svg(
          "path",
          {
            d:
              `M${cx - 4},${cy - 4} L${cx + 4},${cy + 4} M${cx - 4},${cy + 4}` +
              ` L${cx + 4},${cy - 4}`,
            class: "cp-player__cross",
          },
          g,
        );
      }
      for (const [lo, hi] of m.ranges) {
        // where the sent elements sit in the sender
        svg(
          "rect",
          {
            x: LABEL_W + lo * cw + 1,
            y: TOP + m.src * ROW - 1.5,
            width: (hi - lo) * cw - 2,
            height: CELL_H + 3,
            rx: 4,
            class: "cp-player__sent",
          },
          g,
        );
      }
      // its bytes beside it, where no other label is; the status line has them all
      const lx = x0 + 0.75 * bulge + 3,
        mid = (y1 + y2) / 2 + 4;
      const ly = [0, 12, -12, 24, -24]
        .map((dy) => mid + dy)
        .find(
          (y) =>
            y > 10 &&
            y < H - 2 &&
            !placed.some((q) => Math.abs(q[0] - lx) < 40 && Math.abs(q[1] - y) < 12),
        );
      if (ly === undefined) continue;
      placed.push([lx, ly]);
      svg(
        "text",
        {
          x: Math.min(lx, W - 2),
          y: ly,
          class: "cp-player__bytes",
          "text-anchor": lx > W - 40 ? "end" : "start",
        },
        g,
        bytes(m.bytes) + (stuck ? " blocked" : ""),
      );
    }
    this.view.replaceChildren(root);
    const sizes = new Set(moves.map((m) => m.bytes)),
      count = moves.length;
    const total = moves.reduce((s, m) => s + m.bytes, 0);
    this.status.textContent =
      frame.label +
      (!count
        ? ""
        : ` · ${count} message${count > 1 ? "s" : ""}${
            sizes.size === 1 && count > 1
              ? ` of ${bytes(total / count)} each`
              : `, ${bytes(total)} in all`
          }`);
    this.scrub.value = String(this.k);
    this.scrub.setAttribute("aria-valuetext", frame.label);
    this.fig.dataset.frame = String(this.k);
  }
}

function start() {
  for (const fig of document.querySelectorAll("figure.cp-player")) {
    if (fig.dataset.ready) continue;
    const data = fig.querySelector("script.cp-player__trace");
    if (!data) continue;
    fig.dataset.ready = "true";
    new Player(fig, JSON.parse(data.textContent));
  }
}
// Material's document$ emits each page it shows; a page without it: parsed already
if (window.document$?.subscribe) window.document$.subscribe(start);
else start();
