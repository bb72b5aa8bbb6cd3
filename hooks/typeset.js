// Typesets TeX for hooks/typeset.py with the KaTeX package the site installs (npm ci).
// One process per build: each stdin line is a JSON list of [tex, display] pairs (one
// page's math), and the answer is one stdout line, a JSON list of [ok, html or the
// error message], in the same order.
import { createRequire } from "node:module";
import readline from "node:readline";

const katex = createRequire(import.meta.url)(process.argv[2]); // KaTeX's CommonJS

function render([tex, display]) {
  try {
    const html = katex.renderToString(tex, {
      displayMode: display,
      throwOnError: true,
      output: "htmlAndMathml", // MathML for screen readers, HTML for the eye
    });
    return [true, html];
  } catch (error) {
    return [false, String(error.message || error)];
  }
}

const lines = readline.createInterface({ input: process.stdin, terminal: false });
lines.on("line", (line) => {
  process.stdout.write(`${JSON.stringify(JSON.parse(line).map(render))}\n`);
});
