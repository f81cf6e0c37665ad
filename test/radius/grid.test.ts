// The radius sweep's small parts: grids, rescaling, token subsets, slopes, and the global bound
// a layer kind declares (L2 attention's kim) with its horizontal line in the report's chart.
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
import { sweepSpec } from "../../src/report/radius.ts";
import { radiusSweep } from "../../src/radius/sweep.ts";
import { tf, useBackend } from "../../src/backend.ts";
import { createModel } from "../../src/nn/create.ts";
import type { TransformerClassifier } from "../../src/nn/model.ts";

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

test("L2 attention's global bound kim is recorded once, equals its value at every radius, lies above every true value and is drawn as a horizontal line; dot-product attention has none", async () => {
  await useBackend("cpu");
  const sweep = (preset: string) => {
    const model = createModel(preset, 3) as TransformerClassifier;
    const x = tf.randomUniform([1, 28, 28, 1], 0, 1, "float32", 4);
    try {
      return radiusSweep(model, x, null, {
        block: 0,
        radii: [1, 100],
        lengths: [],
        lengthRadius: 10,
        constructed: false,
      });
    } finally {
      x.dispose();
      model.dispose();
    }
  };
  const l2 = sweep("vit-micro-l2");
  assert.equal(l2.globalBounds.length, 1);
  const [kim] = l2.globalBounds;
  assert.equal(kim.name, "kim");
  assert.ok(l2.variants.includes("kim"), "kim is among the variants by default");
  for (const p of l2.points) {
    assert.ok(
      Math.abs(p.bounds.kim! - kim.value) <= 1e-12 * kim.value,
      "the same value at each radius",
    );
    assert.ok(p.true.value <= kim.value, `true ${p.true.value} above kim ${kim.value}`);
  }
  const spec = JSON.stringify(sweepSpec(l2, "radius"));
  assert.match(spec, /"type":"rule"/);
  assert.ok(spec.includes(`"value":${kim.value}`));
  const dot = sweep("vit-micro");
  assert.deepEqual(dot.globalBounds, []);
  assert.ok(!dot.variants.includes("kim"));
  assert.doesNotMatch(JSON.stringify(sweepSpec(dot, "radius")), /"type":"rule"/);
});
