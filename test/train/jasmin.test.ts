import { test } from "node:test";
import assert from "node:assert/strict";
import { tf, useBackend } from "../../src/backend.ts";
import { createModel } from "../../src/nn/create.ts";
import { disposeTrace } from "../../src/nn/trace.ts";
import { sigma as sigmaExact } from "../../src/softmax/index.ts";
import {
  jasminFromProbabilities,
  jasminPenalty,
  selectLayers,
  type JasminNorm,
  type JasminReduce,
} from "../../src/train/jasmin.ts";
import { mulberry32 } from "../helpers/random.ts";

await useBackend("wasm");

const B = 2;
const H = 2;
const N = 5;

/**
 * Attention logits [B, H, N, N] whose rows are well away from the kinks of top2 / the max
 * over rows: each row is a permutation of evenly spaced values (gap 0.8 times a row scale),
 * with a distinct scale per row so the rows' sigmas differ clearly.
 */
function separatedLogits(seed: number): Float32Array {
  const rand = mulberry32(seed);
  const out = new Float32Array(B * H * N * N);
  for (let row = 0; row < B * H * N; row++) {
    const perm = Array.from({ length: N }, (_, i) => i);
    for (let i = N - 1; i > 0; i--) {
      const j = Math.floor(rand() * (i + 1));
      [perm[i], perm[j]] = [perm[j], perm[i]];
    }
    const scale = 0.4 + 0.25 * (row % N) + 0.1 * rand();
    for (let j = 0; j < N; j++) out[row * N + j] = 0.8 * scale * perm[j];
  }
  return out;
}

function jasminOfLogits(logits: tf.Tensor, mask: tf.Tensor | null, norm: JasminNorm, reduce: JasminReduce): tf.Tensor {
  return tf.tidy(() => jasminFromProbabilities([tf.softmax(logits, -1)], mask, { norm, reduce }));
}

function checkFiniteDifferences(norm: JasminNorm, reduce: JasminReduce, withMask: boolean, seed: number): void {
  const values = separatedLogits(seed);
  const mask = withMask ? tf.tensor2d([1, 1, 1, 0, 0, 1, 1, 1, 1, 0], [B, N]) : null;
  const logits = tf.tensor4d(values, [B, H, N, N]);
  const grad = tf.grad((l: tf.Tensor) => jasminOfLogits(l, mask, norm, reduce))(logits);
  const g = grad.dataSync();
  const h = 2e-3;
  const fd = new Float64Array(values.length);
  for (let k = 0; k < values.length; k++) {
    const plus = Float32Array.from(values);
    const minus = Float32Array.from(values);
    plus[k] += h;
    minus[k] -= h;
    const f = (v: Float32Array) =>
      tf.tidy(() => jasminOfLogits(tf.tensor4d(v, [B, H, N, N]), mask, norm, reduce).dataSync()[0]);
    fd[k] = (f(plus) - f(minus)) / (2 * h);
  }
  let scale = 0;
  let diff = 0;
  for (let k = 0; k < g.length; k++) {
    scale = Math.max(scale, Math.abs(g[k]));
    diff = Math.max(diff, Math.abs(g[k] - fd[k]));
  }
  assert.ok(scale > 1e-3, `${norm}/${reduce}: gradient is (nearly) zero`);
  assert.ok(diff <= 1e-2 * scale + 1e-4, `${norm}/${reduce} mask=${withMask}: max |analytic - fd| ${diff} vs max |g| ${scale}`);
  if (mask !== null) {
    // Masked query rows (example 0 rows 3, 4; example 1 row 4) get exactly zero gradient.
    for (let h2 = 0; h2 < H; h2++)
      for (const [b, i] of [[0, 3], [0, 4], [1, 4]])
        for (let j = 0; j < N; j++) assert.equal(g[((b * H + h2) * N + i) * N + j], 0);
  }
  tf.dispose([logits, grad, ...(mask ? [mask] : [])]);
}

for (const norm of ["top2", "quad", "exact"] as const)
  for (const reduce of ["max-log", "max", "mean"] as const)
    test(`JaSMin ${norm}/${reduce}: gradient w.r.t. attention logits matches central finite differences`, () => {
      checkFiniteDifferences(norm, reduce, false, 3);
    });

for (const reduce of ["max-log", "max", "mean"] as const)
  test(`JaSMin top2/${reduce} with a padding mask: finite differences, zero gradient on masked rows`, () => {
    checkFiniteDifferences("top2", reduce, true, 5);
  });

test("JaSMin values match a JS reference (exact sigma; max-log, max, mean; mask)", () => {
  const values = separatedLogits(9);
  const maskValues = [1, 1, 1, 1, 0, 1, 1, 0, 0, 0];
  const p = tf.softmax(tf.tensor4d(values, [B, H, N, N]), -1);
  const probs = p.dataSync();
  const s: number[] = [];
  for (let r = 0; r < B * H * N; r++) s.push(sigmaExact(Array.from(probs.subarray(r * N, r * N + N))));
  const real = (b: number, i: number) => maskValues[b * N + i] === 1;
  let mean = 0;
  let count = 0;
  let maxSum = 0;
  let maxLogSum = 0;
  for (let b = 0; b < B; b++)
    for (let h = 0; h < H; h++) {
      let m = -Infinity;
      for (let i = 0; i < N; i++)
        if (real(b, i)) {
          const v = s[(b * H + h) * N + i];
          mean += v;
          count++;
          m = Math.max(m, v);
        }
      maxSum += m;
      maxLogSum += Math.log(m);
    }
  const mask = tf.tensor2d(maskValues, [B, N]);
  const got = (reduce: JasminReduce) =>
    tf.tidy(() => jasminFromProbabilities([p, p], mask, { norm: "exact", reduce }).dataSync()[0]);
  assert.ok(Math.abs(got("mean") - mean / count) < 1e-5);
  assert.ok(Math.abs(got("max") - maxSum / (B * H)) < 1e-5);
  assert.ok(Math.abs(got("max-log") - maxLogSum / (B * H)) < 1e-5);
  tf.dispose([p, mask]);
});

test("jasminPenalty over a model trace: all layers by default, a subset on request; numTensors unchanged", () => {
  const model = createModel(
    { kind: "vit", imageSize: 8, channels: 1, patchSize: 4, dModel: 8, heads: 2, blocks: 2, mlpHidden: 8, classes: 3 },
    1,
  );
  const x = tf.randomUniform([3, 64], 0, 1, "float32", 2);
  const before = tf.memory().numTensors;
  const { logits, trace } = model.forward(x, { trace: true });
  const read = (layers?: number[]) => {
    const r = jasminPenalty(trace!, { layers });
    const v = r.dataSync()[0];
    r.dispose();
    return v;
  };
  const all = read();
  const first = read([0]);
  const second = read([1]);
  assert.ok(Math.abs(all - (first + second) / 2) < 1e-6);
  assert.notEqual(first, second);
  tf.dispose(logits);
  disposeTrace(trace);
  assert.equal(tf.memory().numTensors, before);
  assert.throws(() => selectLayers(2, [2]), /layer 2 does not exist/);
  assert.throws(() => selectLayers(2, []), /empty/);
  assert.deepEqual(selectLayers(3, [2, 0, 2]), [0, 2]);
  model.dispose();
  x.dispose();
});

test("the gradient of JaSMin flows to the model's attention weights", () => {
  const model = createModel(
    { kind: "vit", imageSize: 8, channels: 1, patchSize: 4, dModel: 8, heads: 2, blocks: 1, mlpHidden: 8, classes: 3 },
    1,
  );
  const x = tf.randomUniform([2, 64], 0, 1, "float32", 3);
  const before = tf.memory().numTensors;
  tf.tidy(() => {
    const traces: ReturnType<typeof model.forward>["trace"][] = [];
    const { grads } = tf.variableGrads(() => {
      const { trace } = model.forward(x, { trace: true });
      traces.push(trace);
      return jasminPenalty(trace!) as tf.Scalar;
    }, model.variables());
    for (const t of traces) disposeTrace(t);
    const wq = model.params.get("blocks.0.attn.wq");
    const norm = tf.norm(grads[wq.name]).dataSync()[0];
    assert.ok(norm > 0 && Number.isFinite(norm), `|d R / d wq| = ${norm}`);
  });
  assert.equal(tf.memory().numTensors, before);
  model.dispose();
  x.dispose();
});
