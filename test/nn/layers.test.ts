import { test } from "node:test";
import assert from "node:assert/strict";
import { tf, useBackend } from "../../src/backend.ts";
import {
  allowedKeys,
  embeddingLookup,
  geluDerivative,
  geluTensor,
  gelu,
  GELU_DERIVATIVE_MAX,
  geluErf,
  geluErfDerivative,
  GELU_ERF_DERIVATIVE_MAX,
  geluErfTensor,
  activationDerivative,
  layerNorm,
  multiHeadAttention,
  type AttentionParams,
  type NamedArray,
} from "../../src/nn/index.ts";
import * as reference64 from "../helpers/reference64.ts";
import { allFinite, relError, uniform } from "./helpers.ts";

await useBackend("wasm");

const d = 8;
const heads = 2;
const n = 5;

function attentionWeights(seed: number, zeroBo = false): Map<string, NamedArray> {
  const m = new Map<string, NamedArray>();
  let s = seed;
  for (const name of ["wq", "wk", "wv", "wo"])
    m.set(`a.${name}`, { data: uniform(d * d, s++, -0.8, 0.8), shape: [d, d] });
  for (const name of ["bq", "bk", "bv", "bo"])
    m.set(`a.${name}`, {
      data: zeroBo && name === "bo" ? new Float32Array(d) : uniform(d, s++, -0.5, 0.5),
      shape: [d],
    });
  return m;
}

function toParams(m: Map<string, NamedArray>): AttentionParams {
  const t = (k: string) => tf.tensor(m.get(`a.${k}`)!.data, m.get(`a.${k}`)!.shape);
  return {
    wq: t("wq"),
    wk: t("wk"),
    wv: t("wv"),
    wo: t("wo"),
    bq: t("bq"),
    bk: t("bk"),
    bv: t("bv"),
    bo: t("bo"),
  };
}

function disposeParams(p: AttentionParams): void {
  for (const t of Object.values(p)) (t as tf.Tensor | undefined)?.dispose();
}

test("attention agrees with the float64 reference, unmasked, padded and causal", () => {
  const weights = attentionWeights(1);
  const p = toParams(weights);
  const b = 2;
  const xData = uniform(b * n * d, 7, -1.5, 1.5);
  const padding = [1, 1, 1, 1, 1, 1, 1, 1, 0, 0];
  for (const [label, pad, causal] of [
    ["unmasked", null, false],
    ["padded", padding, false],
    ["causal", null, true],
    ["padded+causal", padding, true],
  ] as const) {
    tf.tidy(() => {
      const x = tf.tensor3d(xData, [b, n, d]);
      const allowed = allowedKeys(pad ? tf.tensor2d(pad, [b, n]) : null, causal, n);
      const r = multiHeadAttention(x, p, heads, allowed);
      assert.deepEqual(r.p.shape, [b, heads, n, n]);
      assert.deepEqual(r.q.shape, [b, heads, n, d / heads]);
      const out = r.out.dataSync();
      const probs = r.p.dataSync();
      const q = r.q.dataSync();
      for (let s = 0; s < b; s++) {
        const mask = pad ? pad.slice(s * n, (s + 1) * n) : undefined;
        let allowed64: Float64Array | undefined;
        if (mask || causal) {
          allowed64 = new Float64Array(n * n);
          for (let i = 0; i < n; i++)
            for (let j = 0; j < n; j++)
              allowed64[i * n + j] = (!mask || mask[j] ? 1 : 0) * (!causal || j <= i ? 1 : 0);
        }
        const ref = reference64.attention64(
          xData.subarray(s * n * d, (s + 1) * n * d),
          n,
          heads,
          weights,
          "a",
          allowed64,
        );
        assert.ok(
          relError(out.subarray(s * n * d, (s + 1) * n * d), ref.out) < 1e-4,
          `${label} out`,
        );
        assert.ok(
          relError(probs.subarray(s * heads * n * n, (s + 1) * heads * n * n), ref.p) < 1e-5,
          `${label} P`,
        );
        assert.ok(relError(q.subarray(s * n * d, (s + 1) * n * d), ref.q) < 1e-4, `${label} Q`);
        if (allowed64)
          for (let h = 0; h < heads; h++)
            for (let k = 0; k < n * n; k++)
              if (!allowed64[k])
                assert.equal(
                  probs[(s * heads + h) * n * n + k],
                  0,
                  `${label}: masked probability exactly 0`,
                );
      }
    });
  }
  disposeParams(p);
});

test("a fully masked query row gives zero probabilities and output, and no NaN in gradients", () => {
  const weights = attentionWeights(3, true);
  const p = toParams(weights);
  const b = 2;
  tf.tidy(() => {
    const x = tf.tensor3d(uniform(b * n * d, 11, -1, 1), [b, n, d]);
    // sequence 1 is entirely padding: every one of its query rows has no allowed key
    const mask = tf.tensor2d([1, 1, 1, 0, 0, 0, 0, 0, 0, 0], [b, n]);
    const allowed = allowedKeys(mask, false, n);
    const r = multiHeadAttention(x, p, heads, allowed);
    const probs = r.p.arraySync() as number[][][][];
    const out = r.out.arraySync() as number[][][];
    for (const row of probs[1].flat(1)) assert.ok(row.every((v) => v === 0));
    for (const row of out[1]) assert.ok(row.every((v) => v === 0));
    assert.ok(allFinite(r.out.dataSync()) && allFinite(r.p.dataSync()));
    const cot = tf.tensor3d(uniform(b * n * d, 12, -1, 1), [b, n, d]);
    const loss = (xx: tf.Tensor, wq: tf.Tensor, wk: tf.Tensor, wv: tf.Tensor) =>
      tf.sum(tf.mul(multiHeadAttention(xx, { ...p, wq, wk, wv }, heads, allowed).out, cot));
    const grads = tf.grads(loss)([x, p.wq, p.wk, p.wv]);
    for (const g of grads) assert.ok(allFinite(g.dataSync()));
    // sequence 1 contributes nothing through the attention: its input gradient is exactly 0
    const gx = grads[0].arraySync() as number[][][];
    assert.ok(gx[1].flat().every((v) => v === 0));
  });
  disposeParams(p);
});

test("the gradient at masked key positions is exactly 0", () => {
  const weights = attentionWeights(5);
  const p = toParams(weights);
  tf.tidy(() => {
    const x = tf.tensor3d(uniform(n * d, 13, -1, 1), [1, n, d]);
    const mask = tf.tensor2d([1, 1, 1, 0, 0], [1, n]);
    const allowed = allowedKeys(mask, false, n);
    // loss over the real query rows only: padded rows must then get no gradient at all
    const rowWeight = tf.reshape(mask, [1, n, 1]);
    const cot = tf.mul(tf.tensor3d(uniform(n * d, 14, -1, 1), [1, n, d]), rowWeight);
    const g = tf.grad((xx: tf.Tensor) =>
      tf.sum(tf.mul(multiHeadAttention(xx, p, heads, allowed).out, cot)),
    )(x);
    const rows = g.arraySync() as number[][][];
    assert.ok(rows[0][3].every((v) => v === 0) && rows[0][4].every((v) => v === 0));
    assert.ok(rows[0][0].some((v) => v !== 0));
  });
  disposeParams(p);
});

test("layerNorm: constant row gives finite outputs and gradients; agrees with float64", () => {
  tf.tidy(() => {
    const gamma = tf.tensor1d([1, 2, 0.5, -1]);
    const beta = tf.tensor1d([0.1, 0, -0.2, 0.3]);
    const x = tf.tensor2d([3, 3, 3, 3, 1, -2, 0.5, 4], [2, 4]);
    const y = layerNorm(x, gamma, beta);
    const yv = y.dataSync();
    assert.ok(allFinite(yv));
    assert.deepEqual(
      Array.from(yv.subarray(0, 4)).map((v) => Math.round(v * 1e6) / 1e6),
      [0.1, 0, -0.2, 0.3],
    );
    const ref = reference64.layerNorm64(
      x.dataSync(),
      2,
      { data: gamma.dataSync() as Float32Array, shape: [4] },
      { data: beta.dataSync() as Float32Array, shape: [4] },
    );
    assert.ok(relError(yv, ref) < 1e-5);
    const grads = tf.grads((xx: tf.Tensor, g: tf.Tensor, b: tf.Tensor) =>
      tf.sum(tf.mul(layerNorm(xx, g, b), tf.tensor2d([1, -2, 3, 0.5, 1, 1, -1, 2], [2, 4]))),
    )([x, gamma, beta]);
    for (const g of grads) assert.ok(allFinite(g.dataSync()));
  });
});

test("GELU tensor matches the float64 function and the derivative matches finite differences", () => {
  const xs = [-4, -1.5, -0.3, 0, 0.2, 1, 2.1, 5];
  tf.tidy(() => {
    const y = geluTensor(tf.tensor1d(xs)).dataSync();
    xs.forEach((x, i) => assert.ok(Math.abs(y[i] - gelu(x)) < 1e-6));
    const g = tf
      .grad((t: tf.Tensor) => tf.sum(geluTensor(t)))(tf.tensor1d(xs))
      .dataSync();
    xs.forEach((x, i) => {
      const fd = (gelu(x + 1e-6) - gelu(x - 1e-6)) / 2e-6;
      assert.ok(Math.abs(geluDerivative(x) - fd) < 1e-7);
      assert.ok(Math.abs(g[i] - geluDerivative(x)) < 1e-5);
    });
  });
  assert.ok(GELU_DERIVATIVE_MAX > 1.12 && GELU_DERIVATIVE_MAX < 1.14);
  // The module's max (a coarse grid refined by golden section) against a dense grid around the
  // maximum and a scan of the whole line: never below either beyond rounding, and equal to the dense one.
  let dense = 0;
  for (let x = 1; x <= 2; x += 1e-5) dense = Math.max(dense, Math.abs(geluDerivative(x)));
  let wide = 0;
  for (let x = -50; x <= 50; x += 1e-3) wide = Math.max(wide, Math.abs(geluDerivative(x)));
  assert.ok(GELU_DERIVATIVE_MAX >= dense * (1 - 1e-15) && GELU_DERIVATIVE_MAX - dense < 1e-10, `${GELU_DERIVATIVE_MAX} vs ${dense}`);
  assert.ok(GELU_DERIVATIVE_MAX >= wide * (1 - 1e-15));
});

test("exact GELU: tensor, float64 function, derivative and its closed-form max agree", () => {
  const xs = [-4, -1.5, -Math.SQRT2, -0.3, 0, 0.2, 1, Math.SQRT2, 2.1, 5];
  // Phi(x) x at known points: Phi(1) = 0.8413447460685429.
  assert.ok(Math.abs(geluErf(1) - 0.8413447460685429) < 1e-15);
  assert.equal(geluErf(0), 0);
  tf.tidy(() => {
    const y = geluErfTensor(tf.tensor1d(xs)).dataSync();
    xs.forEach((x, i) => assert.ok(Math.abs(y[i] - geluErf(x)) < 1e-6, `x ${x}: ${y[i]} vs ${geluErf(x)}`));
    const g = tf
      .grad((t: tf.Tensor) => tf.sum(geluErfTensor(t)))(tf.tensor1d(xs))
      .dataSync();
    xs.forEach((x, i) => {
      const fd = (geluErf(x + 1e-6) - geluErf(x - 1e-6)) / 2e-6;
      assert.ok(Math.abs(geluErfDerivative(x) - fd) < 1e-7, `x ${x}`);
      assert.ok(Math.abs(g[i] - geluErfDerivative(x)) < 1e-5, `x ${x}: autodiff ${g[i]}`);
    });
  });
  // The closed-form max (docs/math.md section 3) is the max of |derivative| on a dense grid.
  let gridMax = 0;
  for (let x = -20; x <= 20; x += 1e-4) gridMax = Math.max(gridMax, Math.abs(geluErfDerivative(x)));
  assert.ok(GELU_ERF_DERIVATIVE_MAX >= gridMax && GELU_ERF_DERIVATIVE_MAX - gridMax < 1e-9, `${GELU_ERF_DERIVATIVE_MAX} vs ${gridMax}`);
  assert.ok(Math.abs(GELU_ERF_DERIVATIVE_MAX - 1.1289) < 1e-4);
  assert.throws(() => activationDerivative("relu"), /activation: expected one of gelu-tanh, gelu-erf, got "relu"/);
});

test("embedding lookup has a gradient on wasm: ids [0,2,2] on a 3x2 table of ones", () => {
  assert.equal(tf.getBackend(), "wasm");
  tf.tidy(() => {
    const table = tf.ones([3, 2]);
    const ids = tf.tensor1d([0, 2, 2], "int32");
    const g = tf.grad((t: tf.Tensor) => tf.sum(embeddingLookup(t, ids)))(table);
    assert.deepEqual(g.arraySync(), [
      [1, 1],
      [0, 0],
      [2, 2],
    ]);
    assert.deepEqual(
      embeddingLookup(
        tf.tensor2d([1, 2, 3, 4, 5, 6], [3, 2]),
        tf.tensor2d([[2, 0]], [1, 2], "int32"),
      ).arraySync(),
      [
        [
          [5, 6],
          [1, 2],
        ],
      ],
    );
    assert.throws(() => embeddingLookup(table, tf.tensor1d([3], "int32")), /outside \[0, 3\)/);
    assert.throws(() => embeddingLookup(table, tf.tensor1d([0])), /int32/);
  });
});
