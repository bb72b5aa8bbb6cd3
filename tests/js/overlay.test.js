// docs/assets/viewer/overlay.js against snippets/viewer/'s parallel_overlay.py,
// overlay_bytes.py and overlay_dp.py: stages, the rank grid, what each rank holds,
// every collective and its bytes, the bytes per rank and the DP markers; which EP
// rank holds each expert, and the degrees refused, with the Python's line.
import assert from "node:assert/strict";
import { test } from "node:test";
import * as O from "../../docs/assets/viewer/overlay.js";
import { assertClose, goldens } from "./ports.js";

const G = goldens("overlay.json");

test("stage: layer i of n on stage floor(i·pp/n), before and after the stack", () => {
  for (const c of G.stage) assert.equal(O.stage(...c.args), c.want, `${c.args}`);
});

test("ranksOfStage: tp fastest, then cp, pp, dp", () => {
  for (const c of G.ranks_of_stage) {
    assert.deepEqual(O.ranksOfStage(...c.args), c.want, JSON.stringify(c.args));
  }
});

test("epRank: contiguous blocks of E/ep experts", () => {
  for (const c of G.ep_rank) assert.equal(O.epRank(...c.args), c.want, `${c.args}`);
});

test("ranksOfEpRank: the stage's ranks whose dp rank mod ep is r", () => {
  for (const c of G.ranks_of_ep_rank) {
    assert.deepEqual(O.ranksOfEpRank(...c.args), c.want, JSON.stringify(c.args));
  }
});

test("checkDegrees: ep divides dp and the experts, else the Python's line", () => {
  assert.ok(
    G.check_degrees.some((c) => c.want) && G.check_degrees.some((c) => !c.want),
  );
  for (const c of G.check_degrees) {
    const g = G.graphs[c.graph],
      where = `${c.graph} ${JSON.stringify(c.degrees)}`;
    assert.equal(O.checkDegrees(g, c.degrees), c.want, where);
    if (c.want) assert.throws(() => O.collectives(g, c.degrees), { message: c.want });
  }
});

// Maps as Python's dicts come out of JSON: plain objects, keys as strings
function markers(found) {
  return Object.fromEntries(
    [...found].map(([id, mark]) => [
      id,
      { ...mark, stages: Object.fromEntries(mark.stages) },
    ]),
  );
}

for (const c of G.cases) {
  const g = G.graphs[c.graph],
    d = c.degrees;
  test(`${c.graph} at ${JSON.stringify(d)}`, () => {
    const held = O.held(g, d).map(([m, s, psi, prec]) => [m.id, s, psi, prec]);
    assertClose(held, c.held, "held");
    assertClose(O.collectives(g, d), c.collectives, "collectives");
    assertClose(O.rankBytes(g, d), c.rank_bytes, "rankBytes");
    assertClose(markers(O.dpMarkers(g, d)), c.dp_markers, "dpMarkers");
  });
}
