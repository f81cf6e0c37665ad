import { test } from "node:test";
import assert from "node:assert/strict";
import { sigma, sigmaGradient, softmaxRow } from "../../src/softmax/index.ts";
import { EigenvalueDecomposition, Matrix } from "ml-matrix";
import { gaussian, mulberry32 } from "../helpers/random.ts";

test("d sigma / d p matches central finite differences of the dense eigenvalue (p as free variables)", () => {
  const rand = mulberry32(7);
  for (let trial = 0; trial < 30; trial++) {
    const n = 2 + Math.floor(rand() * 12);
    const p = softmaxRow(Array.from({ length: n }, () => gaussian(rand) * 1.5));
    const { grad } = sigmaGradient(p);
    const h = 1e-6;
    for (let k = 0; k < n; k++) {
      // The free-variable function lambda_max(diag(p) - p p^T), off the simplex too.
      const plus = Float64Array.from(p);
      const minus = Float64Array.from(p);
      plus[k] += h;
      minus[k] -= h;
      const fd = (lambdaMax(plus) - lambdaMax(minus)) / (2 * h);
      assert.ok(Math.abs(fd - grad[k]) <= 1e-6, `trial ${trial} k ${k}: analytic ${grad[k]} vs fd ${fd}`);
    }
  }
});

test("chain rule through softmax: d sigma(softmax(z)) / dz matches finite differences of exact sigma", () => {
  const rand = mulberry32(11);
  for (let trial = 0; trial < 30; trial++) {
    const n = 2 + Math.floor(rand() * 20);
    const z = Array.from({ length: n }, () => gaussian(rand) * 2);
    const p = softmaxRow(z);
    const { grad } = sigmaGradient(p);
    // softmax's Jacobian is symmetric: dz = J(p) grad = p * (grad - p.grad).
    let pg = 0;
    for (let i = 0; i < n; i++) pg += p[i] * grad[i];
    const h = 1e-6;
    for (let k = 0; k < n; k++) {
      const zp = [...z];
      const zm = [...z];
      zp[k] += h;
      zm[k] -= h;
      const fd = (sigma(softmaxRow(zp)) - sigma(softmaxRow(zm))) / (2 * h);
      const analytic = p[k] * (grad[k] - pg);
      assert.ok(Math.abs(fd - analytic) <= 1e-7, `trial ${trial} k ${k}: ${analytic} vs ${fd}`);
    }
  }
});

test("masked and zero entries get zero gradient", () => {
  const { grad } = sigmaGradient([0.5, 0, 0.3, 0.2]);
  assert.equal(grad[1], 0);
  const masked = sigmaGradient([0.5, 0.1, 0.3, 0.1], 0, 4, [1, 0, 1, 1]);
  assert.equal(masked.grad[1], 0);
});

/** lambda_max(diag(p) - p p^T) with the plain diagonal p_i - p_i^2: no simplex assumption. */
function lambdaMax(p: Float64Array): number {
  const n = p.length;
  const m = new Matrix(n, n);
  for (let i = 0; i < n; i++) for (let j = 0; j < n; j++) m.set(i, j, (i === j ? p[i] : 0) - p[i] * p[j]);
  return Math.max(...new EigenvalueDecomposition(m, { assumeSymmetric: true }).realEigenvalues);
}
