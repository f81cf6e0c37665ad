// symMaxEigenvalue's certified path (Lanczos, then a Cholesky factorization of t I - A that
// proves lambda_max < t, src/lipschitz/linalg.ts): never below the true largest eigenvalue and
// within 3e-10 of it, on matrices chosen to be hard for Lanczos (clustered and repeated top
// eigenvalues, indefinite, low rank, a random weight Gram matrix's dense spectral edge).
import { test } from "node:test";
import assert from "node:assert/strict";
import { EigenvalueDecomposition, Matrix } from "ml-matrix";
import { gramRows, symMaxEigenvalue } from "../../src/lipschitz/linalg.ts";
import { mulberry32, normals } from "./rulesHelpers.ts";

/** Q diag(lambda) Q^T with a random orthogonal Q (QR of a Gaussian matrix). */
function withSpectrum(lambda: number[], rand: () => number): Float64Array {
  const m = lambda.length;
  // Gram-Schmidt, twice, on Gaussian columns.
  const cols: Float64Array[] = [];
  for (let c = 0; c < m; c++) {
    const v = normals(rand, m);
    for (let pass = 0; pass < 2; pass++)
      for (const u of cols) {
        let d = 0;
        for (let i = 0; i < m; i++) d += u[i] * v[i];
        for (let i = 0; i < m; i++) v[i] -= d * u[i];
      }
    let n = 0;
    for (let i = 0; i < m; i++) n += v[i] * v[i];
    n = Math.sqrt(n);
    for (let i = 0; i < m; i++) v[i] /= n;
    cols.push(v);
  }
  const a = new Float64Array(m * m);
  for (let k = 0; k < m; k++)
    for (let i = 0; i < m; i++)
      for (let j = 0; j < m; j++) a[i * m + j] += lambda[k] * cols[k][i] * cols[k][j];
  for (let i = 0; i < m; i++) for (let j = 0; j < i; j++) a[i * m + j] = a[j * m + i];
  return a;
}

function exactMax(a: Float64Array, m: number): number {
  const rows = Array.from({ length: m }, (_, i) => Array.from(a.subarray(i * m, (i + 1) * m)));
  return Math.max(
    ...new EigenvalueDecomposition(new Matrix(rows), { assumeSymmetric: true }).realEigenvalues,
  );
}

test("symMaxEigenvalue: never below lambda_max, within 3e-10 of it, on hard spectra (size 256, where the certificate is tried)", () => {
  const rand = mulberry32(3504);
  const cases: [string, number[]][] = [];
  for (const m of [256]) {
    cases.push([`uniform m=${m}`, Array.from({ length: m }, () => rand())]);
    cases.push([`repeated top m=${m}`, Array.from({ length: m }, (_, i) => (i < 3 ? 2 : rand()))]);
    cases.push([
      `top pair 1e-9 apart m=${m}`,
      Array.from({ length: m }, (_, i) => (i === 0 ? 1 : i === 1 ? 1 - 1e-9 : 0.99 * rand())),
    ]);
    cases.push([`indefinite m=${m}`, Array.from({ length: m }, () => 4 * rand() - 3)]);
    cases.push([`all negative m=${m}`, Array.from({ length: m }, () => -1 - rand())]);
    cases.push([`rank 2 m=${m}`, Array.from({ length: m }, (_, i) => (i < 2 ? 1 + i : 0))]);
    cases.push([
      `dense edge m=${m}`,
      Array.from({ length: m }, (_, i) => 1 - (i / m) ** 0.5 * 1e-3),
    ]);
  }
  for (const [name, lambda] of cases) {
    const m = lambda.length;
    const a = withSpectrum(lambda, rand);
    const got = symMaxEigenvalue(a, m);
    // The spectrum it was built with (exact up to the rounding of forming A, below 1e-12 of scale).
    const want = Math.max(...lambda);
    const scale = Math.max(...lambda.map(Math.abs));
    assert.ok(got >= want - 1e-12 * scale, `${name}: ${got} below ${want}`);
    assert.ok(
      got <= want + 3e-10 * Math.abs(want) + 1e-12 * scale,
      `${name}: ${got} far above ${want}`,
    );
  }
});

test("symMaxEigenvalue: a 256 x 1024 weight's Gram matrix (the dense spectral edge of a random MLP weight) within 3e-10, from above", () => {
  const rand = mulberry32(3505);
  const w = normals(rand, 256 * 1024, 0.02);
  const g = gramRows(w, 256, 1024);
  const got = symMaxEigenvalue(g, 256);
  const want = exactMax(g, 256);
  assert.ok(got >= want * (1 - 1e-14) && got <= want * (1 + 3e-10), `${got} against ${want}`);
});
