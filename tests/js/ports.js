// What the node tests share: the goldens tests/js/write_goldens.py computed with the Python they port.
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";

const GOLDENS = path.join(import.meta.dirname, "goldens");

function goldens(name) {
  const file = path.join(GOLDENS, name);
  if (!fs.existsSync(file)) {
    throw new Error(`${file} is missing: run python tests/js/write_goldens.py first`);
  }
  return JSON.parse(fs.readFileSync(file, "utf8"));
}

// Numbers to 1e-12 relative: the ports do Python's double operations in Python's
// order, and only a sum's last bits may differ. Everything else exactly equal: the
// same keys, lengths, strings, booleans and nulls.
const REL = 1e-12;

function assertClose(got, want, where) {
  if (typeof want === "number") {
    assert.equal(typeof got, "number", `${where}: ${got} is not a number`);
    const diff = Math.abs(got - want);
    assert.ok(
      diff <= REL * Math.max(Math.abs(got), Math.abs(want)),
      `${where}: got ${got}, Python gives ${want}`,
    );
  } else if (Array.isArray(want)) {
    assert.ok(Array.isArray(got), `${where}: ${JSON.stringify(got)} is not a list`);
    assert.equal(got.length, want.length, `${where}: length`);
    want.forEach((w, i) => {
      assertClose(got[i], w, `${where}[${i}]`);
    });
  } else if (want !== null && typeof want === "object") {
    assert.ok(got !== null && typeof got === "object", `${where}: not an object`);
    const keys = Object.keys(want);
    assert.deepEqual(Object.keys(got).sort(), keys.sort(), `${where}: keys`);
    for (const key of keys) assertClose(got[key], want[key], `${where}.${key}`);
  } else {
    assert.equal(got, want, `${where}: got ${got}, Python gives ${want}`);
  }
}

export { assertClose, goldens };
