/* `python -m snippets size`, ported: argv in, the --json object out, or the one line
   the command prints on stderr. The options (flag, type, choices, default) are the
   CLI's own parser's, read from the page data (snippets/sizing/sizing_widget.py);
   the validators are snippets/core/cli.py's, resolve_model() and setup() are
   snippets/sizing/size_cli.py's, with the same messages. */
import { estimate } from "./estimate.js";
import { py_round, UsageError } from "./formulas.js";

class ArgumentError extends UsageError {} // argparse's: "... (see --help)"

function py_repr(v) {
  // repr() of a str or an int
  if (typeof v !== "string") return String(v);
  const q = v.includes("'") && !v.includes('"') ? '"' : "'";
  const body = v
    .replace(/\\/g, "\\\\")
    .replace(/\n/g, "\\n")
    .replace(/\r/g, "\\r")
    .replace(/\t/g, "\\t");
  return q + (q === "'" ? body.replace(/'/g, "\\'") : body) + q;
}

function format_g(x) {
  // format(x, "g"): 6 significant digits
  if (!Number.isFinite(x)) return Number.isNaN(x) ? "nan" : x > 0 ? "inf" : "-inf";
  if (x === 0) return Object.is(x, -0) ? "-0" : "0";
  const [mantissa, exp] = x.toExponential(5).split("e");
  const X = Number(exp);
  const strip = (s) => (s.includes(".") ? s.replace(/0+$/, "").replace(/\.$/, "") : s);
  if (X >= -4 && X < 6) return strip(x.toFixed(5 - X));
  const digits = String(Math.abs(X)).padStart(2, "0");
  return `${strip(mantissa)}e${X < 0 ? "-" : "+"}${digits}`;
}

const INT = /^\s*[+-]?\d(_?\d)*\s*$/;
const DIGITS = String.raw`\d(_?\d)*`;
const FLOAT = new RegExp(
  String.raw`^\s*[+-]?((${DIGITS})(\.(${DIGITS})?)?` +
    String.raw`|\.${DIGITS})([eE][+-]?${DIGITS})?\s*$`,
);
const SPECIAL = /^\s*([+-]?)(inf|infinity|nan)\s*$/i;

function to_number(text, kind) {
  // Python's int(text) / float(text), or null
  const plain = () => Number(text.trim().replace(/_/g, ""));
  if (kind === "int") return INT.test(text) ? plain() : null;
  const special = SPECIAL.exec(text);
  if (special) {
    if (special[2].toLowerCase() === "nan") return NaN;
    return special[1] === "-" ? -Infinity : Infinity;
  }
  return FLOAT.test(text) ? plain() : null;
}

function _number(text, kind, least, strict) {
  const value = to_number(text, kind);
  if (value === null) {
    const what = kind === "int" ? "a whole number" : "a number";
    throw new TypeError(`expected ${what}, got ${py_repr(text)}`);
  }
  if (kind === "float" && !Number.isFinite(value)) {
    throw new TypeError(`expected a finite number, got ${py_repr(text)}`);
  }
  if (value < least || (strict && value === least)) {
    const bound = strict ? "greater than" : "at least";
    throw new TypeError(`must be ${bound} ${format_g(least)}, got ${format_g(value)}`);
  }
  return value;
}

const TYPES = {
  positive_int: (text) => _number(text, "int", 1, false),
  nonnegative_int: (text) => _number(text, "int", 0, false),
  positive_float: (text) => _number(text, "float", 0, true),
  nonnegative_float: (text) => _number(text, "float", 0, false),
};

function parse_args(data, argv) {
  const byFlag = Object.fromEntries(data.options.map((o) => [o.flag, o]));
  const opts = Object.fromEntries(
    data.options.map((o) => [o.dest, o.switch ? false : o.default]),
  );
  for (let i = 0; i < argv.length; i++) {
    const o = byFlag[argv[i]];
    if (!o) {
      throw new ArgumentError(`unrecognized arguments: ${argv.slice(i).join(" ")}`);
    }
    if (o.switch) {
      opts[o.dest] = true;
      continue;
    }
    const next = argv[i + 1];
    // argparse takes "-x" for an option, not a value, unless it is a negative
    // number (its _negative_number_matcher) or holds a space
    if (
      next === undefined ||
      (next.length > 1 &&
        next[0] === "-" &&
        !/^-\d+$|^-\d*\.\d+$/.test(next) &&
        !next.includes(" "))
    ) {
      throw new ArgumentError(`argument ${o.flag}: expected one argument`);
    }
    const text = argv[++i];
    let value = text;
    if (o.type) {
      try {
        value = TYPES[o.type](text);
      } catch (error) {
        throw new ArgumentError(`argument ${o.flag}: ${error.message}`);
      }
    }
    if (o.choices && !o.choices.includes(value)) {
      const names = o.choices.map(py_repr).join(", ");
      throw new ArgumentError(
        `argument ${o.flag}: invalid choice: ` +
          `${py_repr(value)} (choose from ${names})`,
      );
    }
    opts[o.dest] = value;
  }
  return opts;
}

function resolve_model(data, opts) {
  const given = {};
  for (const k of data.shape) if (opts[k] !== null) given[k] = opts[k];
  const moe = {};
  for (const k of data.moe) if (opts[k] !== null) moe[k] = opts[k];
  if (opts.params !== null) {
    if (opts.preset || Object.keys(given).length || Object.keys(moe).length) {
      throw new UsageError("--params is a bare count: give it without a shape");
    }
    return { params: py_round(opts.params), seq: opts.seq };
  }
  let model;
  if (opts.preset !== null) {
    if (!Object.hasOwn(data.models, opts.preset)) {
      const names = Object.keys(data.models).join(", ");
      throw new UsageError(
        `unknown preset ${py_repr(opts.preset)}: choose one of ${names}`,
      );
    }
    model = Object.assign({}, data.models[opts.preset]);
  } else {
    const missing = data.shape.filter(
      (k) => !(k in given) && !["kv_heads", "ffn"].includes(k),
    );
    if (missing.length) {
      const flags = missing.map((k) => `--${k.replaceAll("_", "-")}`).join(" ");
      throw new UsageError(`give --preset, --params or the shape: ${flags} missing`);
    }
    const arch = opts.arch || "gpt";
    model = { arch: arch, seq: opts.seq, tied: arch === "gpt" };
    model.bias = arch === "gpt";
    Object.assign(model, { kv_heads: given.heads, ffn: 4 * given.hidden });
  }
  if (opts.arch !== null) model.arch = opts.arch;
  if (Object.keys(moe).length && !model.experts && !("experts" in moe)) {
    throw new UsageError("--top-k and the other expert flags need --experts");
  }
  if ("experts" in moe && !model.experts && !("top_k" in moe)) {
    throw new UsageError("--experts needs --top-k: how many experts a token visits");
  }
  return Object.assign(model, given, moe);
}

function setup(opts) {
  const keys = [
    "seq",
    "micro_batch",
    "global_batch",
    "dp",
    "tp",
    "pp",
    "vpp",
    "cp",
    "ep",
    "gpus",
    "gpus_per_node",
    "precision",
    "grad_bytes",
    "efficiency",
    "overlap",
  ];
  const found = {};
  for (const k of keys) if (opts[k] !== null) found[k] = opts[k];
  return Object.assign(found, {
    zero: opts.zero,
    sequence_parallel: opts.sequence_parallel,
    recompute: opts.recompute,
    flash: !opts.no_flash,
    optimizer: opts.optimizer,
    intra_link: opts.intra_link,
    causal_halving: opts.causal_halving,
  });
}

function size(data, argv) {
  const opts = parse_args(data, argv);
  // "this-machine" is the CLI's alone: it reads the roofline and α-β results of
  // the machine that runs it, which a page cannot measure.
  if (opts.gpu === "this-machine") {
    throw new UsageError(
      "--gpu this-machine is measured where it runs: use python -m snippets size",
    );
  }
  if (!Object.hasOwn(data.gpus, opts.gpu)) {
    const names = [...Object.keys(data.gpus), "this-machine"].join(", ");
    throw new UsageError(`unknown GPU ${py_repr(opts.gpu)}: choose one of ${names}`);
  }
  const model = resolve_model(data, opts);
  if (model.seq === null || model.seq === undefined) {
    throw new UsageError("give --seq: only a preset knows its context length");
  }
  const result = estimate(data, model, data.gpus[opts.gpu], setup(opts));
  Object.assign(result.inputs, { preset: opts.preset, gpu_name: opts.gpu });
  return result;
}

// The line `guarded()` (snippets/core/cli.py) or argparse prints for an error.
function error_line(error) {
  if (error instanceof ArgumentError) return `error: ${error.message} (see --help)`;
  if (error instanceof UsageError) return `error: ${error.message}`;
  throw error;
}

// The page's reading of that line: which fields it names, so they can be marked,
// and the message to show beside them. Its --flags, and the few inputs it names by
// their letters (estimate.py's check()).
const NAMED = [
  [/dp·tp·pp·cp/, ["--dp", "--tp", "--pp", "--cp"]],
  [/pp·vpp/, ["--pp", "--vpp"]],
  [/micro-batch × dp/, ["--micro-batch", "--dp"]],
  [/micro-batches \(\d+\)/, ["--global-batch"]],
  [/seq\/cp/, ["--seq", "--cp"]],
  [/with SP/, ["--sequence-parallel"]],
  [/tp, pp, cp need 1/, ["--tp", "--pp", "--cp"]],
  [/^error: unknown preset/, ["--preset"]],
  [/^error: unknown GPU/, ["--gpu"]],
];
const FLAG = /--[a-z][a-z-]*[a-z]/g;

function fields_of(data, line) {
  if (/^error: unrecognized arguments/.test(line)) return [];
  const known = new Set(data.options.map((o) => o.flag));
  const found = (line.match(FLAG) || []).filter((f) => known.has(f));
  for (const [pattern, flags] of NAMED) {
    if (pattern.test(line)) found.push(...flags);
  }
  return [...new Set(found)];
}

// the line without "error: ", argparse's "argument --x: " (the message sits by
// that field) and "(see --help)", each other flag written as label(flag), the
// name its field shows
function field_message(line, label) {
  return line
    .replace(/^error: /, "")
    .replace(/ \(see --help\)$/, "")
    .replace(/^argument --[a-z-]+: /, "")
    .replace(FLAG, (f) => label(f));
}

export {
  ArgumentError,
  error_line,
  field_message,
  fields_of,
  format_g,
  parse_args,
  py_repr,
  resolve_model,
  setup,
  size,
};
