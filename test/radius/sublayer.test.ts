// The radius sweep's maths on single attention layers: the true value against a closed form,
// every bound variant above the true value over a radius sweep, and Castin-style constructed
// inputs above random ones.
import { test } from "node:test";
import assert from "node:assert/strict";
import { tf, useBackend } from "../../src/backend.ts";
import type { NamedArray } from "../../src/nn/params.ts";
import { HEAD_VARIANTS } from "../../src/lipschitz/rules/attentionHead.ts";
import { spectralNorm } from "../../src/lipschitz/linalg.ts";
import { SublayerMap } from "../../src/radius/sublayer.ts";
import { constructedInputs } from "../../src/radius/construct.ts";
import { defaultRadii, logLogSlope, maxTokenNorm, scaleToRadius } from "../../src/radius/grid.ts";
import { gaussian, mulberry32 } from "../helpers/random.ts";

/** An attention layer "attn" with the given weights (W [d, d], biases zero). */
function layerOf(
  w: { wq: number[]; wk: number[]; wv: number[]; wo: number[] },
  d: number,
  heads: number,
) {
  const tensors = new Map<string, tf.Tensor>();
  const weights = new Map<string, NamedArray>();
  const add = (role: string, data: number[], shape: number[]) => {
    tensors.set(`attn.${role}`, tf.tensor(data, shape, "float32"));
    weights.set(`attn.${role}`, { data: Float32Array.from(data), shape });
  };
  for (const role of ["wq", "wk", "wv", "wo"] as const) add(role, w[role], [d, d]);
  add("bo", new Array(d).fill(0), [d]);
  const params = Object.fromEntries(["wq", "wk", "wv", "wo", "bo"].map((r) => [r, `attn.${r}`]));
  const map = new SublayerMap(
    { kind: "attention", name: "attn", params, settings: { heads } },
    tensors,
    weights,
  );
  return { map, dispose: () => tensors.forEach((t) => t.dispose()) };
}

function randomMatrix(rand: () => number, d: number, scale: number): number[] {
  return Array.from({ length: d * d }, () => (gaussian(rand) * scale) / Math.sqrt(d));
}

test("the true value matches (sqrt 2 / 3) t^2 + 1/3 on the first token's block and grows quadratically", async () => {
  await useBackend("cpu");
  const eye = [1, 0, 0, 1];
  const { map, dispose } = layerOf({ wq: eye, wk: eye, wv: eye, wo: eye }, 2, 1);
  try {
    const ts = [0.1, 1, 10, 100, 1000];
    const values: number[] = [];
    for (const t of ts) {
      const x = [0, 0, t, 0, -t, 0];
      const j = map.jacobian(x, 3, 2, null);
      // Rows 0-1 (token 1's output), columns 0-1 (token 1's input): the first token's block.
      const block = [j.data[0], j.data[1], j.data[6], j.data[7]];
      const expected = (Math.SQRT2 / 3) * t * t + 1 / 3;
      assert.ok(
        Math.abs(spectralNorm(Float64Array.from(block), 2, 2) - expected) <= 1e-5 * expected,
        `t = ${t}: block ${spectralNorm(Float64Array.from(block), 2, 2)}, expected ${expected}`,
      );
      const truth = map.truth(x, 3, 2, null);
      assert.equal(truth.method, "dense");
      // The whole map's norm is at least its block's.
      assert.ok(truth.value >= expected * (1 - 1e-6), `t = ${t}: ${truth.value} < ${expected}`);
      values.push(truth.value);
    }
    // At least quadratic over three decades (t = 1 .. 1000), and exponent 2 at large t.
    for (let k = 1; k < ts.length; k++)
      assert.ok(values[k] >= (Math.SQRT2 / 3) * ts[k] ** 2, `t = ${ts[k]}`);
    assert.ok(
      values[4] / values[1] >= 0.99 * 1e6 * (Math.SQRT2 / 3 / (Math.SQRT2 / 3 + 1)),
      `${values[4] / values[1]}`,
    );
    const slope = logLogSlope(ts.slice(2), values.slice(2));
    assert.ok(slope > 1.99 && slope < 2.01, `slope ${slope}`);
  } finally {
    dispose();
  }
});

test("every bound variant is at least the true value at every radius, on random small heads", async () => {
  await useBackend("cpu");
  const rand = mulberry32(7);
  const radii = defaultRadii();
  let checked = 0;
  for (const [d, heads, n] of [
    [4, 1, 5],
    [4, 2, 6],
  ] as const) {
    const w = {
      wq: randomMatrix(rand, d, 1.5),
      wk: randomMatrix(rand, d, 1.5),
      wv: randomMatrix(rand, d, 1),
      wo: randomMatrix(rand, d, 1),
    };
    const { map, dispose } = layerOf(w, d, heads);
    try {
      const base = Array.from({ length: n * d }, () => gaussian(rand));
      for (const r of radii) {
        const x = scaleToRadius(base, n, d, r);
        const truth = map.truth(x, n, d, null).value;
        const bounds = map.bounds(x, n, d, null, HEAD_VARIANTS);
        for (const v of HEAD_VARIANTS) {
          assert.ok(
            bounds[v] >= truth * (1 - 1e-4),
            `d ${d}, H ${heads}, R ${r}: ${v} = ${bounds[v]} < true ${truth}`,
          );
          checked++;
        }
      }
    } finally {
      dispose();
    }
  }
  assert.equal(checked, 2 * radii.length * HEAD_VARIANTS.length);
});

test("constructed inputs give a larger local value than random inputs of the same radius", async () => {
  await useBackend("cpu");
  const rand = mulberry32(11);
  const d = 4;
  const n = 8;
  const w = {
    wv: randomMatrix(rand, d, 1),
    wq: randomMatrix(rand, d, 1),
    wk: randomMatrix(rand, d, 1),
    wo: randomMatrix(rand, d, 1),
  };
  const { map, dispose } = layerOf(w, d, 1);
  const weights = map.roleArrays();
  try {
    for (const r of [3, 10, 30, 100]) {
      const built = constructedInputs(weights, 1, n, r)[0];
      assert.ok(Math.abs(maxTokenNorm(built.x, n, d) - r) < 1e-9 * r, "largest token norm is R");
      const constructed = map.truth(built.x, n, d, null).value;
      const random = Array.from({ length: 8 }, () => {
        const x = scaleToRadius(
          Array.from({ length: n * d }, () => gaussian(rand)),
          n,
          d,
          r,
        );
        return map.truth(x, n, d, null).value;
      }).sort((a, b) => a - b);
      const median = (random[3] + random[4]) / 2;
      assert.ok(
        constructed > 1.5 * median,
        `R ${r}: constructed ${constructed} <= 1.5 x median random ${median}`,
      );
      // Where the construction's regime holds (exp(lambda R^2 / 4) well above n), above every draw.
      if (r >= 30)
        assert.ok(
          constructed > random[7],
          `R ${r}: constructed ${constructed} <= best random ${random[7]}`,
        );
    }
  } finally {
    dispose();
  }
});
