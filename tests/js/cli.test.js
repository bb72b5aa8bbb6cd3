// docs/assets/sizing/estimate.js and cli.js (on formulas.js): the calculator's page
// reads a command line as `python -m snippets size ... --json` does, and gives its
// object, or the one line it prints for bad input.
import assert from "node:assert/strict";
import { test } from "node:test";
import * as F from "../../docs/assets/sizing/cli.js";
import { assertClose, goldens } from "./ports.js";

const G = goldens("cli.json");

test("the cases hold both answers and refusals", () => {
  assert.ok(G.cases.some((c) => c.result) && G.cases.some((c) => c.error));
});

for (const c of G.cases) {
  const argv = c.argv.join(" ");
  test(`size ${argv}`, () => {
    let found = null,
      line = null;
    try {
      found = F.size(G.data, c.argv);
    } catch (error) {
      line = F.error_line(error);
    }
    assert.equal(line, c.error, argv);
    if (c.result) assertClose(found, c.result, argv);
  });
}

// The page marks the fields a refusal names and shows its words beside them.
test("every refusal names a field of the page, without argparse's (see --help)", () => {
  const flags = new Set(G.data.options.map((o) => o.flag));
  for (const c of G.cases.filter((x) => x.error)) {
    const fields = F.fields_of(G.data, c.error);
    const shown = F.field_message(c.error, (f) => `<${f.slice(2)}>`);
    if (c.error.startsWith("error: unrecognized arguments")) {
      assert.deepEqual(fields, [], c.error); // not a field the page has
      continue;
    }
    assert.ok(fields.length > 0 && fields.every((f) => flags.has(f)), c.error);
    for (const f of c.error.match(/--[a-z][a-z-]*[a-z]/g) || []) {
      if (flags.has(f)) assert.ok(fields.includes(f), `${c.error}: ${f}`);
    }
    assert.ok(!/\(see --help\)|^error: |--[a-z]/.test(shown), shown);
    // its flags become the fields' names ("unknown GPU 'x'" names none: the words
    // do; argparse's "argument --x:" is the field the message sits beside)
    const rest = c.error
      .replace(/^error: argument --[a-z-]+: /, "")
      .replace(/ \(see --help\)$/, "");
    const named = /--[a-z]/.test(rest);
    assert.ok(!named || fields.some((f) => shown.includes(`<${f.slice(2)}>`)), shown);
  }
});

test("the page's field message for the command's lines", () => {
  const label = (f) => ({ "--tp": "tp", "--heads": "heads" })[f] || f.slice(2);
  assert.equal(
    F.field_message(
      "error: argument --tp: expected a whole number, got '1.5' (see --help)",
      label,
    ),
    "expected a whole number, got '1.5'",
  );
  assert.equal(
    F.field_message("error: --heads 64 is not divisible by --tp 3", label),
    "heads 64 is not divisible by tp 3",
  );
  const given = F.fields_of(G.data, "error: dp·tp·pp·cp = 2 but --gpus is 3");
  assert.deepEqual(given, ["--gpus", "--dp", "--tp", "--pp", "--cp"]);
});
