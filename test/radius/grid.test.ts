// The radius sweep's small parts: grids, rescaling, token subsets, slopes, the global-bound hook
// and its horizontal line in the report's chart.
import { test } from "node:test";
import assert from "node:assert/strict";
import {
  defaultRadii,
  evenlySpaced,
  logLogSlope,
  maxTokenNorm,
  scaleToRadius,
  selectTokens,
} from "../../src/radius/grid.ts";
import {
  globalBounds,
  registerGlobalBound,
  unregisterGlobalBound,
} from "../../src/radius/globalBounds.ts";
import { sweepSpec } from "../../src/report/radius.ts";
import type { RadiusResult } from "../../src/radius/sweep.ts";

test("the default radii run from 0.1 to 1000, three per decade", () => {
  const r = defaultRadii();
  assert.equal(r.length, 13);
  assert.equal(r[0], 0.1);
  assert.equal(r[3], 1);
  assert.equal(r[12], 1000);
  for (let k = 1; k < r.length; k++) assert.ok(Math.abs(r[k] / r[k - 1] - 10 ** (1 / 3)) < 0.01);
});

test("scaleToRadius sets the largest token norm and keeps directions; a zero input is refused", () => {
  const x = scaleToRadius([3, 4, 0, 1], 2, 2, 10);
  assert.deepEqual(Array.from(x), [6, 8, 0, 2]);
  assert.equal(maxTokenNorm(x, 2, 2), 10);
  assert.throws(() => scaleToRadius([0, 0], 1, 2, 1), /every token is zero/);
  assert.throws(() => scaleToRadius([1, 0], 1, 2, -1), /radius must be finite and > 0/);
});

test("evenlySpaced keeps the first token and spreads the others; selectTokens restricts the mask", () => {
  assert.deepEqual(evenlySpaced([0, 1, 2, 3, 4, 5, 6, 7, 8], 3), [0, 1, 8]);
  assert.deepEqual(evenlySpaced([0, 1, 2, 3, 4], 5), [0, 1, 2, 3, 4]);
  assert.deepEqual(evenlySpaced([2, 5, 7], 1), [2]);
  assert.throws(() => evenlySpaced([0, 1], 3), /n must be an integer from 1 to 2/);
  // A causal 3 x 3 mask restricted to tokens 0 and 2 stays causal.
  const causal = { data: Uint8Array.from([1, 0, 0, 1, 1, 0, 1, 1, 1]), n: 3 };
  const sel = selectTokens([1, 2, 3, 4, 5, 6], 2, [0, 2], causal);
  assert.deepEqual(Array.from(sel.x), [1, 2, 5, 6]);
  assert.deepEqual(Array.from(sel.allowed!), [1, 0, 1, 1]);
});

test("logLogSlope finds the exponent of a power law and ignores non-positive points", () => {
  assert.ok(Math.abs(logLogSlope([1, 10, 100], [3, 300, 30000]) - 2) < 1e-12);
  assert.ok(Math.abs(logLogSlope([0, 4, 16, 64], [5, 2, 4, 8]) - 0.5) < 1e-12);
  assert.ok(Number.isNaN(logLogSlope([1], [1])));
});

test("a kind's registered global bound is returned and drawn as a horizontal line", () => {
  assert.deepEqual(globalBounds("toyAttention", {}, {}), []);
  registerGlobalBound("toyAttention", () => [{ name: "toy", value: 42 }]);
  try {
    assert.deepEqual(globalBounds("toyAttention", {}, {}), [{ name: "toy", value: 42 }]);
    assert.throws(() => registerGlobalBound("toyAttention", () => []), /already has global bounds/);
    const result = {
      layer: { kind: "toyAttention", name: "blocks.0.attn", params: {}, settings: {} },
      variants: ["t3-exact"],
      lengthRadius: 10,
      globalBounds: globalBounds("toyAttention", {}, {}),
      points: [1, 10].map((r) => ({
        sweep: "radius",
        set: "held-out",
        input: 0,
        radius: r,
        n: 5,
        true: { value: r, method: "dense", converged: true, iterations: 0 },
        bounds: { "t3-exact": 2 * r },
      })),
    } as unknown as RadiusResult;
    const spec = JSON.stringify(sweepSpec(result, "radius"));
    assert.match(spec, /"type":"rule"/);
    assert.match(spec, /"value":42/);
  } finally {
    unregisterGlobalBound("toyAttention");
  }
  assert.deepEqual(globalBounds("toyAttention", {}, {}), []);
});
