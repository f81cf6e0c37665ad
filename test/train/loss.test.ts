import { test } from "node:test";
import assert from "node:assert/strict";
import { tf, useBackend, type BackendName } from "../../src/backend.ts";
import type { ImageSplit } from "../../src/data/dataset.ts";
import type { Model } from "../../src/nn/create.ts";
import { crossEntropySum } from "../../src/robustness/loss.ts";
import { evaluate } from "../../src/train/evaluate.ts";
import { jasminFromProbabilities } from "../../src/train/jasmin.ts";
import { crossEntropy } from "../../src/train/loss.ts";

// The one cross-entropy of training, evaluation and the attacks: value and gradient at a -inf
// logit (the NaN of -inf * 0 before), and a normal case against float64 by hand, on both
// backends (wasm lacks some gradient kernels; see backend.ts).

const LN2 = Math.log(2);

function close(actual: ArrayLike<number>, expected: number[], tol: number, what: string): void {
  assert.equal(actual.length, expected.length, what);
  for (let i = 0; i < expected.length; i++)
    assert.ok(
      Math.abs(actual[i] - expected[i]) <= tol,
      `${what}[${i}]: ${actual[i]} vs ${expected[i]}`,
    );
}

/** CE_i = log(sum_j exp z_ij) - z_iy and its gradient softmax - onehot, in float64. */
function reference(logits: number[][], labels: number[]) {
  const values: number[] = [];
  const grads: number[] = [];
  logits.forEach((z, i) => {
    const m = Math.max(...z);
    const sum = z.reduce((a, v) => a + Math.exp(v - m), 0);
    values.push(m + Math.log(sum) - z[labels[i]]);
    z.forEach((v, j) => grads.push(Math.exp(v - m) / sum - (j === labels[i] ? 1 : 0)));
  });
  return { values, grads };
}

for (const backend of ["wasm", "cpu"] as BackendName[]) {
  test(`crossEntropy (${backend}): logits [[-inf, 0, 0]] with label 1 give ln 2 and gradient [0, -0.5, 0.5]`, async () => {
    await useBackend(backend);
    const before = tf.memory().numTensors;
    const z = tf.tensor2d([[-Infinity, 0, 0]]);
    const y = tf.tensor1d([1], "int32");
    for (const reduction of ["none", "sum", "mean"] as const) {
      const v = crossEntropy(z, y, reduction);
      close(v.dataSync(), [LN2], 1e-6, `${reduction} value`);
      v.dispose();
      const g = tf.grad((l: tf.Tensor) => tf.sum(crossEntropy(l, y, reduction)))(z);
      close(g.dataSync(), [0, -0.5, 0.5], 1e-6, `${reduction} gradient`);
      g.dispose();
    }
    // The attacks' loss is the same function.
    const s = crossEntropySum(z, y);
    close(s.dataSync(), [LN2], 1e-6, "crossEntropySum");
    const gs = tf.grad((l: tf.Tensor) => crossEntropySum(l, y))(z);
    close(gs.dataSync(), [0, -0.5, 0.5], 1e-6, "crossEntropySum gradient");
    // The true class ruled out: +inf, not NaN.
    const y0 = tf.tensor1d([0], "int32");
    const inf = crossEntropy(z, y0, "none");
    assert.equal(inf.dataSync()[0], Infinity);
    tf.dispose([z, y, s, gs, y0, inf]);
    assert.equal(tf.memory().numTensors, before);
  });

  test(`crossEntropy (${backend}): a normal batch matches float64 by hand, value and gradient`, async () => {
    await useBackend(backend);
    const logits = [
      [1.5, -0.3, 2.2, 0.7],
      [0.1, 0.2, -1.0, 3.3],
      [-2.5, 4.0, 4.0, -7.25],
    ];
    const labels = [2, 0, 1];
    const ref = reference(logits, labels);
    const z = tf.tensor2d(logits);
    const y = tf.tensor1d(labels, "int32");
    const none = crossEntropy(z, y, "none");
    close(none.dataSync(), ref.values, 1e-5, "per example");
    const total = ref.values.reduce((a, v) => a + v, 0);
    const sum = crossEntropy(z, y, "sum");
    close(sum.dataSync(), [total], 1e-5, "sum");
    const mean = crossEntropy(z, y, "mean");
    close(mean.dataSync(), [total / 3], 1e-5, "mean");
    const gSum = tf.grad((l: tf.Tensor) => crossEntropy(l, y, "sum"))(z);
    close(gSum.dataSync(), ref.grads, 1e-6, "sum gradient");
    const gMean = tf.grad((l: tf.Tensor) => crossEntropy(l, y, "mean"))(z);
    close(
      gMean.dataSync(),
      ref.grads.map((g) => g / 3),
      1e-6,
      "mean gradient",
    );
    tf.dispose([z, y, none, sum, mean, gSum, gMean]);
  });
}

test("crossEntropy refuses malformed inputs with the caller's name, never a silent 0 or NaN", async () => {
  await useBackend("wasm");
  const z = tf.tensor2d([[0, 1, 2]]);
  const cases: [() => unknown, RegExp][] = [
    [
      () => crossEntropy(z, tf.tensor1d([3], "int32"), "sum", "trainStep"),
      /^trainStep: label 0 is 3, expected an integer in 0\.\.2$/,
    ],
    [() => crossEntropy(z, tf.tensor1d([-1], "int32"), "sum"), /^crossEntropy: label 0 is -1/],
    [() => crossEntropy(z, tf.tensor1d([1]), "sum"), /labels must be int32/],
    [() => crossEntropy(z, tf.tensor1d([1, 0], "int32"), "sum"), /labels must be \[1\]/],
    [
      () => crossEntropy(tf.tensor1d([0, 1]), tf.tensor1d([1], "int32"), "sum"),
      /logits must be \[batch, classes\]/,
    ],
    [() => crossEntropy(tf.zeros([0, 3]), tf.tensor1d([], "int32"), "mean"), /empty batch/],
    [
      () => crossEntropy(z, tf.tensor1d([1], "int32"), "max" as "sum"),
      /reduction must be none, sum or mean/,
    ],
  ];
  for (const [call, pattern] of cases)
    assert.throws(call, (e: Error) => {
      assert.ok(e instanceof RangeError || e instanceof TypeError, String(e));
      assert.match(e.message, pattern);
      return true;
    });
  z.dispose();
});

test("evaluate: the mean cross-entropy of a model with a -inf logit is ln 2, not NaN", async () => {
  await useBackend("wasm");
  const model = {
    config: { classes: 3 },
    forward: () => ({
      logits: tf.tensor2d([
        [-Infinity, 0, 0],
        [0, -Infinity, 0],
      ]),
    }),
  } as unknown as Model;
  const split = {
    images: new Float32Array(2),
    labels: Int32Array.from([1, 0]),
    count: 2,
    shape: [1, 1, 1],
    indices: Int32Array.from([0, 1]),
  } as ImageSplit;
  const result = evaluate(model, split);
  assert.ok(Math.abs(result.crossEntropy - LN2) < 1e-6, String(result.crossEntropy));
  assert.equal(result.accuracy, 1);
});

test("JaSMin selects rows with `where`: a non-finite value on a masked row does not make R NaN", async () => {
  await useBackend("wasm");
  // One example, one head, 3 query rows; row 2 is padding and holds NaN (0 * NaN was NaN).
  const rows = [
    [0.7, 0.2, 0.1],
    [0.4, 0.4, 0.2],
  ];
  const p = tf.tensor4d([[[...rows, [NaN, NaN, NaN]]]]);
  const clean = tf.tensor4d([[[...rows, [1, 0, 0]]]]);
  const mask = tf.tensor2d([[1, 1, 0]]);
  for (const reduce of ["max-log", "max", "mean"] as const) {
    const r = jasminFromProbabilities([p], mask, { reduce });
    const want = jasminFromProbabilities([clean], mask, { reduce });
    const [got, expected] = [r.dataSync()[0], want.dataSync()[0]];
    assert.ok(
      Number.isFinite(got) && Math.abs(got - expected) < 1e-7,
      `${reduce}: ${got} vs ${expected}`,
    );
    tf.dispose([r, want]);
  }
  tf.dispose([p, clean, mask]);
});
