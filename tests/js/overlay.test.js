// docs/assets/viewer/overlay.js against snippets/viewer/'s parallel_overlay.py,
// overlay_bytes.py and overlay_dp.py: stages, the rank grid, what each rank holds,
// every collective and its bytes, the bytes per rank and the DP markers.
"use strict";
const assert = require("node:assert/strict");
const { test } = require("node:test");
const { load, goldens, assertClose } = require("./ports.js");

const O = load("sizing/formulas.js", "viewer/overlay.js").CPViewerOverlay;
const G = goldens("overlay.json");

test("stage: layer i of n on stage floor(i·pp/n), before and after the stack", () => {
  for (const c of G.stage) assert.equal(O.stage(...c.args), c.want, `${c.args}`);
});

test("ranksOfStage: tp fastest, then cp, pp, dp", () => {
  for (const c of G.ranks_of_stage) {
    assert.deepEqual(O.ranksOfStage(...c.args), c.want, JSON.stringify(c.args));
  }
});

// Maps as Python's dicts come out of JSON: plain objects, keys as strings
function markers(found) {
  return Object.fromEntries([...found].map(([id, mark]) =>
    [id, { ...mark, stages: Object.fromEntries(mark.stages) }]));
}

for (const c of G.cases) {
  const g = G.graphs[c.graph], d = c.degrees;
  test(`${c.graph} at ${JSON.stringify(d)}`, () => {
    const held = O.held(g, d).map(([m, s, psi, prec]) => [m.id, s, psi, prec]);
    assertClose(held, c.held, "held");
    assertClose(O.collectives(g, d), c.collectives, "collectives");
    assertClose(O.rankBytes(g, d), c.rank_bytes, "rankBytes");
    assertClose(markers(O.dpMarkers(g, d)), c.dp_markers, "dpMarkers");
  });
}
