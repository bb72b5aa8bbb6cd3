// docs/assets/sizing/formulas.js against snippets/sizing/'s Python, function by
// function, on the goldens tests/js/write_goldens.py wrote.
import assert from "node:assert/strict";
import { test } from "node:test";
import * as formulas from "../../docs/assets/sizing/formulas.js";
import { assertClose, goldens } from "./ports.js";

const F = { ...formulas }; // a plain object: looked up by module name below
const G = goldens("formulas.json");
const MODULES = ["params", "memory", "activations", "flops", "traffic", "throughput"];

const byFn = new Map();
for (const c of G.cases) byFn.set(c.fn, [...(byFn.get(c.fn) || []), c]);

test("py_round rounds as Python's round(): half to even", () => {
  for (const c of G.round) {
    // === : Python's int 0 has no sign, a double's -0 does
    assert.ok(F.py_round(c.x) === c.want, `round(${c.x}): ${F.py_round(c.x)}`);
  }
});

test("every ported function has golden cases", () => {
  const ported = MODULES.flatMap((m) => Object.keys(F[m]).map((n) => `${m}.${n}`));
  assert.deepEqual(
    ported.filter((fn) => !byFn.has(fn)),
    [],
  );
});

for (const [fn, cases] of byFn) {
  test(`${fn} gives what Python gives`, () => {
    const [module, name] = fn.split(".");
    for (const c of cases) {
      const args = c.data ? [G.data, ...c.args] : c.args;
      assertClose(F[module][name](...args), c.want, `${fn}(${JSON.stringify(c.args)})`);
    }
  });
}
