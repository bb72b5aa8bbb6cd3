// docs/assets/predict/predict.js: how a reader's typed guess is read, and what the
// page says of it against the answer the build computed.
import assert from "node:assert/strict";
import { test } from "node:test";
import * as P from "../../docs/assets/predict/predict.js";

test("a guess is read in the forms a person types", () => {
  assert.equal(P.parse("1572864"), 1572864);
  assert.equal(P.parse("1,572,864"), 1572864);
  assert.equal(P.parse("1.5 MiB"), 1.5 * 2 ** 20);
  assert.equal(P.parse("1.9GB"), 1.9e9);
  assert.equal(P.parse("3/11"), 3 / 11);
  assert.equal(P.parse("27%"), 0.27);
  assert.equal(P.parse("1.5e6"), 1.5e6);
  assert.ok(Number.isNaN(P.parse("a lot")));
});

test("the verdict says right within 5%, else how far and which way", () => {
  assert.equal(P.verdict(1, 1), "Exactly right.");
  assert.equal(P.verdict(0.26, 3 / 11), "Within 5%: right.");
  assert.equal(P.verdict(2 ** 20, 1.5 * 2 ** 20), "Off: 1.50× too low.");
  assert.equal(P.verdict(3e6, 1.5e6), "Off: 2.00× too high.");
  assert.match(P.verdict(NaN, 1), /not a number/);
  assert.match(P.verdict(-1, 1), /sign/);
});
