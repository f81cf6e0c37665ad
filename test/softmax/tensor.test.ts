import { test } from "node:test";
import assert from "node:assert/strict";
import { tf, useBackend } from "../../src/backend.ts";
import { sigmaRows, sigmaTensor, sigmaTop2Tensor, sigmaQuadTensor, sigmaGradient } from "../../src/softmax/index.ts";
import { gaussian, mulberry32 } from "../helpers/random.ts";

await useBackend("wasm");

function randomLogits(shape: number[], seed: number, scale: number): tf.Tensor {
  const rand = mulberry32(seed);
  const size = shape.reduce((a, b) => a * b, 1);
  return tf.tensor(Float32Array.from({ length: size }, () => gaussian(rand) * scale), shape);
}

test("tensor versions agree with the float64 functions to float32 precision", () => {
  for (const scale of [0.1, 1, 5, 30]) {
    const p = tf.tidy(() => tf.softmax(randomLogits([2, 3, 17, 17], 3, scale)));
    const data = p.dataSync();
    for (const [fn, norm] of [
      [sigmaTensor, "exact"],
      [sigmaQuadTensor, "quad"],
      [sigmaTop2Tensor, "top2"],
    ] as const) {
      const t = fn(p);
      assert.deepEqual(t.shape, [2, 3, 17]);
      const got = t.dataSync();
      const want = sigmaRows(data, 17, { norm });
      for (let i = 0; i < want.length; i++)
        assert.ok(Math.abs(got[i] - want[i]) <= 1e-6 * want[i] + 1e-7, `${norm} scale ${scale} row ${i}: ${got[i]} vs ${want[i]}`);
      t.dispose();
    }
    p.dispose();
  }
});

test("one-hot and tied rows give exact values and finite gradients", () => {
  const p = tf.tensor2d([
    [1, 0, 0, 0],
    [0.25, 0.25, 0.25, 0.25],
    [0.4, 0.4, 0.2, 0],
  ]);
  for (const fn of [sigmaTensor, sigmaQuadTensor, sigmaTop2Tensor]) {
    const v = fn(p);
    const values = v.dataSync();
    assert.ok(Math.abs(values[0]) < 1e-7 && Math.abs(values[1] - 0.25) < 1e-7 && Math.abs(values[2] - 0.4) < 1e-7, `${fn.name}: ${values}`);
    v.dispose();
    const g = tf.grad((x: tf.Tensor) => tf.sum(fn(x)))(p);
    assert.ok(g.dataSync().every(Number.isFinite), `${fn.name} gradient has non-finite entries`);
    g.dispose();
  }
  p.dispose();
});

test("exact sigma's custom gradient equals the float64 analytic gradient and finite differences through softmax", () => {
  const z = randomLogits([5, 9], 21, 2);
  const p = tf.softmax(z);
  const g = tf.grad((x: tf.Tensor) => tf.sum(sigmaTensor(x)))(p);
  const gd = g.dataSync();
  const pd = p.dataSync();
  for (let row = 0; row < 5; row++) {
    const want = sigmaGradient(pd, row * 9, 9).grad;
    for (let k = 0; k < 9; k++) assert.ok(Math.abs(gd[row * 9 + k] - want[k]) < 1e-5);
  }
  // Through softmax, float32 central differences of the whole pipeline.
  const loss = (x: tf.Tensor) => tf.sum(tf.mul(sigmaTensor(tf.softmax(x)), tf.range(1, 6)));
  const gz = tf.grad(loss)(z).dataSync();
  const zd = Float64Array.from(z.dataSync());
  const h = 1e-2;
  for (let i = 0; i < zd.length; i += 4) {
    const eval64 = (delta: number) =>
      tf.tidy(() => {
        const zz = Float64Array.from(zd);
        zz[i] += delta;
        return loss(tf.tensor(Float32Array.from(zz), [5, 9])).dataSync()[0];
      });
    const fd = (eval64(h) - eval64(-h)) / (2 * h);
    assert.ok(Math.abs(fd - gz[i]) < 2e-3, `entry ${i}: autodiff ${gz[i]} vs fd ${fd}`);
  }
  tf.dispose([z, p, g]);
});

test("closed forms differentiate by autodiff and leave no tensors behind", () => {
  const before = tf.memory().numTensors;
  const z = randomLogits([4, 12], 5, 3);
  for (const fn of [sigmaTop2Tensor, sigmaQuadTensor, sigmaTensor]) {
    const g = tf.grad((x: tf.Tensor) => tf.sum(fn(tf.softmax(x))))(z);
    assert.ok(g.dataSync().every(Number.isFinite));
    assert.ok(g.dataSync().some((v) => v !== 0));
    g.dispose();
    tf.tidy(() => {
      fn(tf.softmax(z));
    });
  }
  z.dispose();
  assert.equal(tf.memory().numTensors, before);
});

test("tensor versions reject bad input", () => {
  const s = tf.scalar(1);
  const i = tf.tensor1d([1, 0], "int32");
  assert.throws(() => sigmaTensor(s), /rank >= 1/);
  assert.throws(() => sigmaTop2Tensor(i), /float32/);
  tf.dispose([s, i]);
});
