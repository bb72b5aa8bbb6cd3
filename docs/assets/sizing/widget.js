/* The sizing calculator in the page: a form whose state is an argv of
   `python -m snippets size` (the CLI's own options, from the page data), computed by
   cli.js + estimate.js + formulas.js (ports of the Python) and drawn by render.js.
   An empty field is an option not given: the CLI's default (greyed in the field).
   The query string holds the argv (`?preset=llama3-8b&dp=8&no-flash`), so a link
   restores the configuration. window.cpSizing is for tests and the curious:
   apply(argv) sets the form and returns what the page then shows.
   Fields are text boxes, so what the page computes with is what the field shows
   (a number box reads "1e" as empty, the default); the arrow keys step whole
   numbers and the sliders' values. Where the command refuses, the fields its line
   names are marked (aria-invalid, a message beside them) and nothing is computed:
   the figures stay the last valid configuration's, dimmed and labelled stale. A
   summary (role=status) heads the results: beside the form on a wide page, where
   the results column stays in view (sticky); stuck under the header on a phone. */
import { error_line, field_message, fields_of, size } from "./cli.js";
import { el, render, summary } from "./render.js";

function mount(figure) {
  const data = JSON.parse(figure.querySelector(".cp-sizing__data").textContent);
  // the note's first command, at micro-batch 1
  const START = [
    "--preset",
    "llama3-8b",
    "--dp",
    "8",
    "--zero",
    "3",
    "--recompute",
    "selective",
  ];
  const MODES = { custom: "custom shape", params: "a bare parameter count" };
  const GROUPS = [
    [
      "Model",
      [
        "--preset",
        "--arch",
        "--layers",
        "--hidden",
        "--heads",
        "--kv-heads",
        "--ffn",
        "--vocab",
        "--params",
        "--seq",
      ],
    ],
    [
      "Batch and parallelism",
      [
        "--micro-batch",
        "--global-batch",
        "--dp",
        "--tp",
        "--pp",
        "--vpp",
        "--cp",
        "--zero",
        "--sequence-parallel",
      ],
    ],
    [
      "Mixture of experts",
      [
        "--experts",
        "--top-k",
        "--shared-experts",
        "--expert-ffn",
        "--moe-every",
        "--dense-layers",
        "--ep",
      ],
    ],
    [
      "Memory and FLOPs",
      [
        "--recompute",
        "--no-flash",
        "--precision",
        "--grad-bytes",
        "--optimizer",
        "--causal-halving",
      ],
    ],
    [
      "Hardware",
      [
        "--gpu",
        "--gpus",
        "--gpus-per-node",
        "--intra-link",
        "--efficiency",
        "--overlap",
      ],
    ],
  ];
  const LABELS = {
    "--preset": "model",
    "--no-flash": "FlashAttention",
    "--kv-heads": "kv heads",
    "--micro-batch": "micro-batch b",
    "--global-batch": "global batch B",
    "--gpus-per-node": "GPUs a node",
    "--gpu": "GPU",
    "--gpus": "GPUs",
    "--sequence-parallel": "sequence parallel",
    "--grad-bytes": "gradient bytes",
    "--intra-link": "link in a node",
    "--causal-halving": "causal ÷2 (Megatron)",
    "--params": "parameters",
    "--experts": "experts E",
    "--top-k": "top-k",
    "--shared-experts": "shared experts",
    "--expert-ffn": "expert ffn",
    "--moe-every": "MoE every k-th layer",
    "--dense-layers": "first dense layers",
    "--ep": "ep (inside dp)",
  };
  const SLIDERS = { "--efficiency": [0.05, 1, 0.05], "--overlap": [0, 1, 0.05] };
  const HINTS = { kv_heads: "= heads", ffn: "4 × hidden" }; // a custom shape's
  const options = Object.fromEntries(data.options.map((o) => [o.flag, o]));
  const key = (flag) => flag.slice(2).replaceAll("-", "_");
  const shapeFlags = ["--arch"].concat(
    data.shape.map((k) => `--${k.replaceAll("_", "-")}`),
  );
  const moeFlags = data.moe.map((k) => `--${k.replaceAll("_", "-")}`);
  const controls = {};
  let uid = 0;

  // the value a control shows when its flag is not given ("" for none)
  function shown(o) {
    if (o.flag === "--preset") return START[1];
    const d = o.default !== null ? o.default : data.defaults[o.dest];
    return d === null || d === undefined || typeof d === "boolean" ? "" : String(d);
  }

  function choices(o) {
    if (o.flag === "--preset")
      return Object.keys(data.models).concat(["custom", "params"]);
    if (o.flag === "--gpu") return Object.keys(data.gpus);
    if (o.flag === "--arch") return [""].concat(o.choices);
    return o.choices;
  }

  function control(o, box) {
    const id = `cp-sizing-${++uid}`;
    const field = el("div", { class: "cp-sizing__field" }, box);
    const label = el("label", { for: id }, field, LABELS[o.flag] || o.flag.slice(2));
    let input;
    if (o.switch) {
      field.classList.add("cp-sizing__field--check");
      input = el("input", { type: "checkbox", id: id });
      label.prepend(input);
    } else if (o.choices || !o.type) {
      input = el("select", { id: id }, field);
      for (const v of choices(o)) {
        el("option", { value: String(v) }, input, MODES[v] || String(v) || "default");
      }
    } else {
      const isInt = o.type.endsWith("_int");
      input = el(
        "input",
        {
          type: "text",
          id: id,
          autocomplete: "off",
          spellcheck: "false",
          inputmode: isInt ? "numeric" : "decimal",
        },
        field,
      );
      input.addEventListener("keydown", (event) => stepKey(event, o, input));
      if (SLIDERS[o.flag]) {
        const [lo, hi, step] = SLIDERS[o.flag];
        const slider = el(
          "input",
          {
            type: "range",
            min: lo,
            max: hi,
            step: step,
            "aria-label": `${label.textContent} (slider)`,
          },
          field,
        );
        // the text field is the value; the form's listener then updates
        slider.addEventListener("input", () => {
          input.value = slider.value;
        });
        input.addEventListener("input", () => {
          if (Number.isFinite(Number(input.value))) slider.value = input.value;
        });
        input.slider = slider;
        slider.field = field;
        slider.owner = input;
      }
    }
    if (o.help) input.title = o.help;
    input.name = o.flag.slice(2);
    input.field = field;
    controls[o.flag] = input;
  }

  // ArrowUp/ArrowDown step a whole number by 1 (not below its least) and a slider's
  // value by its step, as a number box would; other keys type
  function stepKey(event, o, input) {
    if (event.key !== "ArrowUp" && event.key !== "ArrowDown") return;
    const sign = event.key === "ArrowUp" ? 1 : -1,
      text = input.value.trim();
    const start = text !== "" ? text : input.placeholder;
    if (o.type.endsWith("_int")) {
      if (!/^[+-]?\d+$/.test(start) && start !== "") return;
      const least = o.type === "positive_int" ? 1 : 0;
      input.value = String(
        Math.max(
          least,
          (start === "" ? least : Number(start)) + (start === "" ? 0 : sign),
        ),
      );
    } else if (SLIDERS[o.flag] && Number.isFinite(Number(start)) && start !== "") {
      const [lo, hi, step] = SLIDERS[o.flag];
      const next = Math.min(hi, Math.max(lo, Number(start) + sign * step));
      input.value = String(Math.round(next * 100) / 100);
    } else {
      return;
    }
    event.preventDefault();
    input.dispatchEvent(new Event("input", { bubbles: true }));
  }

  const layout = el("div", { class: "cp-sizing__layout" }, figure);
  const form = el("form", { class: "cp-sizing__form", novalidate: "" }, layout);
  for (const [legend, flags] of GROUPS) {
    const box = el("fieldset", {}, form);
    el("legend", {}, box, legend);
    for (const flag of flags) control(options[flag], box);
  }
  const panel = el("div", { class: "cp-sizing__panel" }, layout);
  const status = el("p", { class: "cp-sizing__summary", role: "status" }, panel);
  const out = el("div", { class: "cp-sizing__out" }, panel);
  const error = el("p", { class: "cp-sizing__error" }, out);
  const results = el("div", { class: "cp-sizing__results" }, out);
  // the message beside the field a refusal is about (one at a time)
  const message = el("p", { class: "cp-sizing__message", id: "cp-sizing-message" });
  // under both columns: the communication table, the command and its link
  const more = el("div", { class: "cp-sizing__more" }, layout);
  const table = el("div", { class: "cp-sizing__results" }, more);
  const cmd = el("code", {}, el("pre", { class: "cp-sizing__cmd" }, more));
  const link = el(
    "a",
    { class: "cp-sizing__link", href: "#calculator" },
    el("p", {}, more),
    "Link to this configuration",
  );

  function setValue(flag, value) {
    const c = controls[flag];
    if (c.type === "checkbox") {
      c.checked = value;
      return;
    }
    if (c.tagName === "SELECT" && ![...c.options].some((x) => x.value === value)) {
      el("option", { value: value }, c, value); // kept, so the error can name it
    }
    c.value = value;
    if (c.slider) c.slider.value = value;
  }

  function reset() {
    for (const o of data.options) {
      setValue(o.flag, o.flag === "--no-flash" ? true : o.switch ? false : shown(o));
    }
  }

  const mode = () => controls["--preset"].value;

  function argv() {
    const found = [],
      m = mode();
    for (const o of data.options) {
      const c = controls[o.flag];
      if (o.flag === "--preset") {
        if (!(m in MODES)) found.push("--preset", m);
      } else if (o.flag === "--no-flash") {
        if (!c.checked) found.push(o.flag);
      } else if (o.switch) {
        if (c.checked) found.push(o.flag);
      } else if (
        o.flag === "--params"
          ? m === "params"
          : (!shapeFlags.includes(o.flag) && !moeFlags.includes(o.flag)) ||
            m !== "params"
      ) {
        if (c.value !== "" && c.value !== shown(o)) found.push(o.flag, c.value);
      }
    }
    return found;
  }

  function apply(list) {
    reset();
    let m = "custom";
    for (let i = 0; i < list.length; i++) {
      const o = options[list[i]];
      if (!o) continue;
      if (o.switch) {
        setValue(o.flag, o.flag !== "--no-flash");
        continue;
      }
      const value = String(list[++i] ?? "");
      if (o.flag === "--preset") m = value;
      else setValue(o.flag, value);
      if (o.flag === "--params") m = "params";
    }
    setValue("--preset", m);
    return update(false);
  }

  function query(list) {
    const parts = [];
    for (let i = 0; i < list.length; i++) {
      const name = encodeURIComponent(list[i].slice(2));
      parts.push(
        options[list[i]].switch ? name : `${name}=${encodeURIComponent(list[++i])}`,
      );
    }
    return parts.join("&");
  }
  const quote = (s) =>
    /^[\w.,:+=@%/-]+$/.test(s) ? s : `'${s.replace(/'/g, "'\\''")}'`;

  function placeholders(r) {
    const m = mode(),
      preset = data.models[m],
      c = r?.inputs;
    for (const flag of shapeFlags) {
      const hint = HINTS[key(flag)] || "required";
      if (flag !== "--arch") {
        controls[flag].placeholder = preset ? String(preset[key(flag)]) : hint;
      }
      controls[flag].field.hidden = m === "params";
    }
    controls["--params"].field.hidden = m !== "params";
    for (const flag of moeFlags) {
      // a preset's own, or the model is dense
      const own = preset ? preset[key(flag)] : undefined;
      controls[flag].placeholder =
        own !== undefined ? String(own) : flag === "--experts" ? "dense" : "";
      controls[flag].field.hidden = m === "params";
    }
    controls["--seq"].placeholder = preset ? String(preset.seq) : "required";
    controls["--global-batch"].placeholder = c ? String(c.global_batch) : "b × dp";
    controls["--gpus"].placeholder = c ? String(c.gpus) : "dp·tp·pp·cp";
    const precision = data.precisions[controls["--precision"].value];
    controls["--grad-bytes"].placeholder = precision ? String(precision.grad) : "";
  }

  const label = (flag) => (controls[flag] ? LABELS[flag] || flag.slice(2) : flag);
  let marked = [];

  // Mark the visible fields a refusal names, those the configuration gives if any
  // (not a preset's heads beside a --tp that does not divide them); its message goes
  // beside the one the reader just changed, else the first filled in.
  function mark(line, edited, list) {
    for (const c of marked) {
      c.removeAttribute("aria-invalid");
      c.removeAttribute("aria-describedby");
      c.field.classList.remove("cp-sizing__field--invalid");
    }
    message.remove();
    const named =
      line === null
        ? []
        : fields_of(data, line).filter((f) => controls[f] && !controls[f].field.hidden);
    const given = named.filter(
      (f) => list.includes(f) || (f === "--preset" && !(mode() in MODES)),
    );
    marked = (given.length ? given : named).map((f) => controls[f]);
    if (!marked.length) return null;
    const filled = (c) => c.type === "text" && c.value !== "";
    const at = marked.find((c) => c === edited) || marked.find(filled) || marked[0];
    for (const c of marked) {
      c.setAttribute("aria-invalid", "true");
      c.setAttribute("aria-describedby", message.id);
      c.field.classList.add("cp-sizing__field--invalid");
    }
    message.textContent = field_message(line, label);
    at.field.append(message);
    return at;
  }

  // The line above the results: what was not computed, and a link to the field.
  function explain(line, at, before) {
    error.replaceChildren();
    el("strong", {}, error, "Not recomputed. ");
    if (at) {
      const name = at.field.querySelector("label").textContent;
      const go = el("a", { href: `#${at.id}` }, error, name);
      go.addEventListener("click", (event) => {
        event.preventDefault();
        at.focus();
      });
      error.append(`: ${message.textContent}. `);
    } else {
      error.append(`${field_message(line, label)}. `);
    }
    error.append(
      before
        ? "The figures below are stale: they are the last valid " + "configuration's."
        : "No figures until the configuration is valid.",
    );
  }

  let last = { argv: [], result: null, error: null, query: "" };
  let drawn = null; // the result the figures show
  function update(byReader, edited) {
    const list = argv();
    let result = null,
      line = null;
    try {
      result = size(data, list);
    } catch (e) {
      line = error_line(e);
    }
    placeholders(result);
    const at = mark(line, edited, list);
    if (result) {
      render(results, result, data.palette, table);
      drawn = result;
    } else {
      explain(line, at, drawn !== null);
    }
    error.hidden = line === null;
    figure.classList.toggle("cp-sizing--invalid", line !== null);
    results.dataset.stale = table.dataset.stale = String(line !== null);
    if (line === null) {
      status.textContent = summary(result);
    } else {
      const names = marked.map((c) => c.field.querySelector("label").textContent);
      status.textContent = `Not recomputed: ${
        names.length ? `fix ${names.join(", ")}` : field_message(line, label)
      }${drawn ? "; the figures are stale" : ""}`;
    }
    const q = query(list);
    cmd.textContent = ["python -m snippets size"].concat(list.map(quote)).join(" ");
    link.href = `?${q}#calculator`;
    if (byReader) {
      history.replaceState(null, "", `${location.pathname}?${q}${location.hash}`);
    }
    last = { argv: list, result: result, error: line, query: q };
    return last;
  }

  let lastMode = null;
  form.addEventListener("input", (event) => {
    if (event.target === controls["--preset"]) {
      // a new model: from its shape on
      const was = data.models[lastMode],
        m = mode();
      for (const flag of shapeFlags) {
        controls[flag].value = m === "custom" && was ? String(was[key(flag)]) : "";
      }
      if (m === "params" && last.result) {
        controls["--params"].value = String(last.result.params);
      }
      if (m in MODES && was && controls["--seq"].value === "") {
        controls["--seq"].value = String(was.seq); // only a preset knows it
      } else if (!(m in MODES) && lastMode in MODES) {
        controls["--seq"].value = ""; // back to a preset: its own context
      }
    }
    lastMode = mode();
    update(true, event.target.owner || event.target);
  });
  form.addEventListener("submit", (event) => event.preventDefault());

  const fromUrl = [];
  for (const [name, value] of new URLSearchParams(location.search)) {
    const o = options[`--${name}`];
    if (o) fromUrl.push(o.flag, ...(o.switch ? [] : [value]));
  }
  apply(fromUrl.length ? fromUrl : START);
  lastMode = mode();
  window.cpSizing = { apply: apply, argv: argv, last: () => last, data: data };
}

const figure = document.querySelector("figure.cp-sizing");
if (figure) mount(figure);
