import { test } from "node:test";
import assert from "node:assert/strict";
import { sigma, sigmaQuad, sigmaRows, sigmaTop2 } from "../../src/softmax/index.ts";

const map = [0.5, 0.3, 0.2, 0.7, 0.3, 0, 0.2, 0.2, 0.6, 1, 0, 0];

test("sigmaRows computes one value per row for each norm", () => {
  const rows = [map.slice(0, 3), map.slice(3, 6), map.slice(6, 9), map.slice(9, 12)];
  assert.deepEqual([...sigmaRows(map, 3)], rows.map(sigma));
  assert.deepEqual([...sigmaRows(Float32Array.from(map), 3, { norm: "quad" })], rows.map((r) => sigmaQuad(Float32Array.from(r))));
  assert.deepEqual([...sigmaRows(map, 3, { norm: "top2" })], rows.map(sigmaTop2));
});

test("sigmaRows honours a mask: masked entries are zeros, a fully masked row gives 0", () => {
  const mask = [1, 1, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1];
  const out = sigmaRows(map, 3, { mask });
  assert.equal(out[0], sigma([0.5, 0.3, 0]));
  assert.equal(out[1], 0);
  for (const norm of ["exact", "quad", "top2"] as const) assert.equal(sigmaRows(map, 3, { mask, norm })[1], 0);
});

test("sigmaRows rejects bad shapes with errors that name the argument", () => {
  assert.throws(() => sigmaRows(map, 5), /data: length 12 is not a multiple of the row length n = 5/);
  assert.throws(() => sigmaRows(map, 0), /n: expected a positive integer/);
  assert.throws(() => sigmaRows(map, 3, { mask: [1, 1] }), /mask: expected length 12/);
  assert.throws(() => sigmaRows(map, 3, { out: new Float64Array(2) }), /out: expected length 4/);
});
