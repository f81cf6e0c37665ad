import { test } from "node:test";
import assert from "node:assert/strict";
import { tf, useBackend } from "../../src/backend.ts";
import {
  denseJacobian,
  denseLipschitz,
  jvp,
  normalize,
  powerIterationLipschitz,
  spectralNorm,
  symEigen,
  vjp,
} from "../../src/lipschitz/truth/index.ts";
import { Matrix, SingularValueDecomposition } from "ml-matrix";
import { uniform } from "../nn/helpers.ts";

await useBackend("wasm");

/** Runs fn and checks that tf.memory().numTensors is the same before and after. */
function noLeak<T>(fn: () => T): T {
  const before = tf.memory().numTensors;
  const out = fn();
  assert.equal(tf.memory().numTensors, before, "numTensors changed");
  return out;
}

const smallMap = (w: tf.Tensor) => (x: tf.Tensor) =>
  tf.mul(tf.softmax(tf.matMul(x, w), -1), tf.tanh(tf.matMul(x, w)));

test("vjp and jvp: adjoint identity, finite differences, dense modes agree, no leaks", () => {
  const w = tf.tensor2d(uniform(12, 1, -1, 1), [3, 4]);
  const x = tf.tensor2d(uniform(6, 2, -1, 1), [2, 3]);
  const f = smallMap(w);
  const u = tf.tensor2d(uniform(8, 3, -1, 1), [2, 4]);
  const v = tf.tensor2d(uniform(6, 4, -1, 1), [2, 3]);
  const ju = noLeak(() => {
    const r = vjp(f, x, u);
    const d = r.dataSync();
    r.dispose();
    return d;
  });
  const jv = noLeak(() => {
    const r = jvp(f, x, v);
    const d = r.dataSync();
    r.dispose();
    return d;
  });
  const ud = u.dataSync();
  const vd = v.dataSync();
  let lhs = 0;
  let rhs = 0;
  for (let i = 0; i < 8; i++) lhs += ud[i] * jv[i];
  for (let i = 0; i < 6; i++) rhs += ju[i] * vd[i];
  assert.ok(Math.abs(lhs - rhs) < 1e-5 * Math.max(1, Math.abs(lhs)), `${lhs} vs ${rhs}`);
  // central differences of f along v
  const h = 1e-2;
  const fd = tf.tidy(() =>
    tf.div(tf.sub(f(tf.add(x, tf.mul(v, h))), f(tf.sub(x, tf.mul(v, h)))), 2 * h).dataSync(),
  );
  for (let i = 0; i < 8; i++) assert.ok(Math.abs(fd[i] - jv[i]) < 2e-3, `fd ${fd[i]} jvp ${jv[i]}`);
  const a = noLeak(() => denseJacobian(f, x));
  const b = noLeak(() => denseJacobian(f, x, { mode: "jvp" }));
  assert.equal(a.rows, 8);
  assert.equal(a.cols, 6);
  for (let i = 0; i < a.data.length; i++) assert.ok(Math.abs(a.data[i] - b.data[i]) < 1e-5);
  assert.throws(() => vjp(f, x, v), /cotangent has shape/);
  assert.throws(() => jvp(f, x, u), /tangent has shape/);
  tf.dispose([w, x, u, v]);
});

test("normalize: the zero vector gives 0, not NaN", () => {
  const z = normalize(new Float64Array(5));
  assert.equal(z.norm, 0);
  assert.deepEqual(Array.from(z.unit), [0, 0, 0, 0, 0]);
  assert.deepEqual(normalize([]).norm, 0);
  const t = normalize([3, 4]);
  assert.equal(t.norm, 5);
  assert.deepEqual(Array.from(t.unit), [0.6, 0.8]);
  const tiny = normalize([3e-200, 4e-200]);
  assert.ok(Math.abs(tiny.unit[0] - 0.6) < 1e-15);
  assert.throws(() => normalize([1, Number.NaN]), /not|NaN/);
});

test("softmax at equal logits from the all-ones start (its null space): the random probe gives 1/4, not 0", () => {
  // J = diag(p) - p p^T = (I - 11^T/4)/4: eigenvalue 1/4 with multiplicity 3, and 1 spans the null space.
  const x = tf.zeros([4]);
  const r = noLeak(() =>
    powerIterationLipschitz((t) => tf.softmax(t), x, { start: [1, 1, 1, 1], seed: 5 }),
  );
  assert.ok(Math.abs(r.value - 0.25) < 1e-6, `value ${r.value}`);
  assert.ok(r.converged && r.residual <= r.tolerance);
  // dense oracle
  assert.ok(Math.abs(denseLipschitz((t) => tf.softmax(t), x) - 0.25) < 1e-6);
  x.dispose();
});

test("power iteration on a zero map returns 0, converged after its random restarts, without NaN", () => {
  // Zero: Df v = 0 in float32 even with the direction scaled by 2^120, on the start and on
  // maxRestarts random directions.
  const x = tf.tensor1d([1, 2, 3]);
  const r = noLeak(() => powerIterationLipschitz((t) => tf.mul(t, 0), x, { maxRestarts: 2 }));
  assert.equal(r.value, 0);
  assert.ok(r.converged);
  assert.equal(r.restarts, 2);
  x.dispose();
});

test("power iteration on maps with constants 1e-25, 1e-31, 1e-60, 1e25 and 1e38: the constant times the map's, converged, never a converged 0", () => {
  // gloro #8 / issue 38: Df^T Df v ~ L^2 underflowed float32 (a converged 0 for 1e-25 and
  // 1e-31) or overflowed it (1e25 threw); the products now run at a power-of-two scale.
  const w = tf.tensor2d(uniform(30, 9, -1, 1), [5, 6]);
  const x = tf.tensor2d(uniform(15, 10, -1, 1), [3, 5]);
  const g = smallMap(w);
  const truth = denseLipschitz(g, x);
  // 1e-60 as two factors of 1e-30 (a single float32 constant cannot be below 1.4e-45).
  for (const factors of [[1e-25], [1e-31], [1e-30, 1e-30], [1e25], [1e38]]) {
    const c = factors.reduce((a, b) => a * b, 1);
    const f = (t: tf.Tensor) => factors.reduce((y: tf.Tensor, k) => tf.mul(y, k), g(t));
    const r = noLeak(() => powerIterationLipschitz(f, x));
    assert.ok(r.converged && r.residual <= r.tolerance, `${c}: converged (residual ${r.residual})`);
    assert.ok(Math.abs(r.value / (c * truth) - 1) < 1e-5, `${c}: ${r.value} vs ${c * truth}`);
  }
  // A map that is NaN stays refused, at every scale.
  assert.throws(
    () => powerIterationLipschitz((t) => tf.mul(t, Number.NaN), x),
    /non-finite entry \(NaN\) at every scale/,
  );
  tf.dispose([w, x]);
});

test("power iteration matches the dense spectral norm and approaches it from below", () => {
  const w = tf.tensor2d(uniform(30, 9, -1, 1), [5, 6]);
  const x = tf.tensor2d(uniform(15, 10, -1, 1), [3, 5]);
  const f = smallMap(w);
  const truth = denseLipschitz(f, x);
  const r = noLeak(() => powerIterationLipschitz(f, x, { maxIterations: 500, tolerance: 1e-6 }));
  assert.ok(Math.abs(r.value - truth) / truth < 1e-5, `${r.value} vs ${truth}`);
  assert.ok(r.value <= truth * (1 + 1e-5));
  assert.ok(r.converged && r.residual <= 1e-6);
  const early = powerIterationLipschitz(f, x, { maxIterations: 2 });
  assert.equal(early.iterations, 2);
  assert.ok(early.value <= truth * (1 + 1e-5));
  assert.ok(!early.converged && early.residual > early.tolerance, "a capped estimate says so");
  // Below the float32 residual floor the test cannot hold: unconverged, never a false claim.
  const strict = powerIterationLipschitz(f, x, { tolerance: 1e-12 });
  assert.equal(strict.converged, strict.residual <= 1e-12);
  assert.throws(() => powerIterationLipschitz(f, x, { maxIterations: 0 }), /maxIterations/);
  assert.throws(() => powerIterationLipschitz(f, x, { start: [1, 2] }), /start has 2 entries/);
  tf.dispose([w, x]);
});

test("symmetric eigenvalues and spectral norm (float64)", () => {
  // [[2, 1], [1, 2]] has eigenvalues 3 and 1
  const e = Float64Array.from(symEigen([2, 1, 1, 2], 2).values)
    .sort()
    .reverse();
  assert.ok(Math.abs(e[0] - 3) < 1e-14 && Math.abs(e[1] - 1) < 1e-14);
  // diag(1, 2, 3) rotated: singular values of a 2x3 matrix [[3, 0, 0], [0, 4, 0]] -> 4
  assert.ok(Math.abs(spectralNorm([3, 0, 0, 0, 4, 0], 2, 3) - 4) < 1e-14);
  // tall matrix: transpose of the above
  assert.ok(Math.abs(spectralNorm([3, 0, 0, 4, 0, 0], 3, 2) - 4) < 1e-14);
  // random symmetric 6x6: trace equals eigenvalue sum
  const r = uniform(36, 3, -1, 1);
  const s = new Float64Array(36);
  for (let i = 0; i < 6; i++)
    for (let j = 0; j < 6; j++) s[i * 6 + j] = r[i * 6 + j] + r[j * 6 + i];
  const ev = symEigen(s, 6).values;
  let tr = 0;
  for (let i = 0; i < 6; i++) tr += s[i * 6 + i];
  assert.ok(Math.abs(ev.reduce((a, b) => a + b, 0) - tr) < 1e-12);
  assert.throws(() => symEigen([1, 2, 3], 2), RangeError);
});

/** x -> d * x (elementwise): Df = diag(d), singular values |d_i|. */
const diagonalMap = (d: number[]) => {
  const t = tf.tensor1d(d);
  return { f: (x: tf.Tensor) => tf.mul(x, t), dispose: () => t.dispose() };
};

test("issue 9: diag(1, 0.999, 0.5) gives 1 within 1e-6, converged, with its record", () => {
  const { f, dispose } = diagonalMap([1, 0.999, 0.5]);
  const x = tf.ones([3]);
  for (const seed of [0, 1, 2, 3]) {
    const r = noLeak(() => powerIterationLipschitz(f, x, { seed }));
    assert.ok(Math.abs(r.value - 1) <= 1e-6, `seed ${seed}: ${r.value}`);
    assert.ok(r.converged, `seed ${seed}`);
    assert.equal(r.method, "lanczos");
    assert.equal(r.tolerance, 1e-6);
    assert.ok(r.residual <= 1e-6, `residual ${r.residual}`);
    assert.ok(r.iterations <= 3, `${r.iterations} products (the space spans R^3 after 3)`);
  }
  tf.dispose(x);
  dispose();
});

test("close singular values in 200 dimensions: converged only once within tolerance; a cap is flagged", () => {
  // 1, 0.999, then 198 values in [0, 0.99): plain power iteration needs thousands of steps.
  const d = Array.from({ length: 200 }, (_, i) =>
    i === 0 ? 1 : i === 1 ? 0.999 : (0.99 * ((i * 7919) % 200)) / 200,
  );
  const { f, dispose } = diagonalMap(d);
  const x = tf.ones([200]);
  for (const cap of [2, 5, 10, 20, 30, 40, 60, 1000]) {
    const r = powerIterationLipschitz(f, x, { maxIterations: cap });
    assert.ok(r.iterations <= cap, `cap ${cap}: ${r.iterations}`);
    assert.ok(r.value <= 1 + 1e-6, `cap ${cap}: ${r.value} above the truth`);
    assert.equal(
      r.converged,
      r.residual <= r.tolerance,
      `cap ${cap}: converged means the residual test`,
    );
    if (r.converged) assert.ok(1 - r.value <= 1e-6, `cap ${cap}: converged at ${r.value}`);
    else assert.equal(r.iterations, cap, `cap ${cap}: stopped early without converging`);
  }
  const capped = powerIterationLipschitz(f, x, { maxIterations: 5 });
  assert.ok(!capped.converged && capped.residual > 1e-6 && 1 - capped.value > 1e-6);
  const full = noLeak(() => powerIterationLipschitz(f, x));
  assert.ok(
    full.converged && 1 - full.value <= 1e-6 && full.iterations < 100,
    `${full.iterations}`,
  );
  // A small search space (thick restarts every 6 vectors) still converges to the same value.
  const small = powerIterationLipschitz(f, x, { basisSize: 6 });
  assert.ok(small.converged && 1 - small.value <= 1e-6, `${small.value} after ${small.iterations}`);
  tf.dispose(x);
  dispose();
});

test("issue 9: an explicit start on the second singular direction still finds the first", () => {
  const two = diagonalMap([3, 1]);
  const x2 = tf.ones([2]);
  const r = noLeak(() => powerIterationLipschitz(two.f, x2, { start: [0, 1] }));
  assert.ok(Math.abs(r.value - 3) <= 3e-6, `diag(3, 1) from e2: ${r.value}`);
  assert.ok(r.converged && r.residual <= 1e-6);
  // 64 dimensions, where the probe alone has a smaller Rayleigh quotient than the start's 1.
  const d = Array.from({ length: 64 }, (_, i) =>
    i === 0 ? 3 : i === 1 ? 1 : 0.9 * Math.cos(i) ** 2,
  );
  const big = diagonalMap(d);
  const x64 = tf.ones([64]);
  for (const k of [1, 5]) {
    const start = new Array<number>(64).fill(0);
    start[k] = 1;
    const s = powerIterationLipschitz(big.f, x64, { start, seed: 7 });
    assert.ok(Math.abs(s.value - 3) <= 3e-6 && s.converged, `start e_${k}: ${s.value}`);
  }
  tf.dispose([x2, x64]);
  two.dispose();
  big.dispose();
});

test("a start on the second right singular vector of a dense matrix map: the largest is found", () => {
  const rows = 7;
  const cols = 5;
  const wData = uniform(rows * cols, 21, -1, 1);
  const w = tf.tensor2d(wData, [cols, rows]); // f(x) = x W, x [1, cols]
  const x = tf.zeros([1, cols]);
  const f = (t: tf.Tensor) => tf.matMul(t, w);
  const truth = denseLipschitz(f, x);
  // Right singular vectors of W^T (the Jacobian), from ml-matrix.
  const jac = new Matrix(rows, cols);
  for (let i = 0; i < cols; i++) for (let j = 0; j < rows; j++) jac.set(j, i, wData[i * rows + j]);
  const svd = new SingularValueDecomposition(jac);
  assert.ok(Math.abs(svd.diagonal[0] - truth) < 1e-5 * truth);
  const second = svd.rightSingularVectors.getColumn(1);
  const r = noLeak(() => powerIterationLipschitz(f, x, { start: second }));
  assert.ok(
    Math.abs(r.value - truth) <= 2e-6 * truth,
    `${r.value} vs ${truth} (second: ${svd.diagonal[1]})`,
  );
  assert.ok(r.converged);
  tf.dispose([w, x]);
});

test("power iteration: bad options are refused", () => {
  const x = tf.ones([3]);
  const f = (t: tf.Tensor) => tf.mul(t, 2);
  assert.throws(() => powerIterationLipschitz(f, x, { basisSize: 2 }), /basisSize/);
  assert.throws(() => powerIterationLipschitz(f, x, { tolerance: -1 }), /tolerance/);
  assert.throws(() => powerIterationLipschitz(f, x, { tolerance: Number.NaN }), /tolerance/);
  assert.throws(() => powerIterationLipschitz(f, x, { maxRestarts: 1.5 }), /maxRestarts/);
  assert.throws(() => powerIterationLipschitz(f, tf.ones([2], "int32")), /float32/);
  const nan = (t: tf.Tensor) => tf.mul(t, Number.NaN);
  assert.throws(() => powerIterationLipschitz(nan, x), /non-finite/);
  x.dispose();
});
