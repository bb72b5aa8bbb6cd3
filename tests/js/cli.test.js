// docs/assets/sizing/estimate.js and cli.js (on formulas.js): the calculator's page
// reads a command line as `python -m snippets size ... --json` does, and gives its
// object, or the one line it prints for bad input.
"use strict";
const assert = require("node:assert/strict");
const { test } = require("node:test");
const { load, goldens, assertClose } = require("./ports.js");

const F = load("sizing/formulas.js", "sizing/estimate.js", "sizing/cli.js")
  .CPSizingFormulas;
const G = goldens("cli.json");

test("the cases hold both answers and refusals", () => {
  assert.ok(G.cases.some((c) => c.result) && G.cases.some((c) => c.error));
});

for (const c of G.cases) {
  const argv = c.argv.join(" ");
  test(`size ${argv}`, () => {
    let found = null, line = null;
    try {
      found = F.size(G.data, c.argv);
    } catch (error) {
      line = F.error_line(error);
    }
    assert.equal(line, c.error, argv);
    if (c.result) assertClose(found, c.result, argv);
  });
}
