// The dense float64 helpers of src/lipschitz/linalg.ts at the edges of float64's range: every
// norm, Gram matrix and eigenvalue helper squares entries, so they scale first (issue 9).
import { test } from "node:test";
import assert from "node:assert/strict";
import { Matrix, SingularValueDecomposition } from "ml-matrix";
import {
  euclideanNorm,
  gramCols,
  gramRows,
  scaleExponent,
  spectralNorm,
  sqrtFactor,
  symEigen,
  symMaxEigenvalue,
} from "../../src/lipschitz/linalg.ts";
import { normalize } from "../../src/lipschitz/truth/index.ts";
import { uniform } from "../nn/helpers.ts";

const SCALES = [1e-200, 1e200, 1e-300, 1e300, 2 ** -1000, 2 ** 1000];

function relClose(a: number, b: number, rel: number, what: string): void {
  assert.ok(Number.isFinite(a), `${what}: ${a}`);
  assert.ok(
    Math.abs(a - b) <= rel * Math.abs(b),
    `${what}: ${a} vs ${b} (rel ${Math.abs(a - b) / Math.abs(b)})`,
  );
}

/** A rows x cols matrix with entries in [-1, 1] (row-major). */
const matrix = (rows: number, cols: number, seed: number) => uniform(rows * cols, seed, -1, 1);

test("spectralNorm of c M for c = 1e-200 and 1e200 is c ||M|| (was 0, and a RangeError)", () => {
  for (const [rows, cols] of [
    [5, 3],
    [3, 5],
    [6, 6],
    [1, 4],
  ]) {
    const m = Array.from(matrix(rows, cols, rows * 10 + cols));
    const base = spectralNorm(m, rows, cols);
    const svd = new SingularValueDecomposition(
      new Matrix(Array.from({ length: rows }, (_, i) => m.slice(i * cols, (i + 1) * cols))),
    );
    relClose(base, svd.diagonal[0], 1e-12, `${rows}x${cols} against ml-matrix`);
    for (const c of SCALES)
      relClose(
        spectralNorm(
          m.map((v) => v * c),
          rows,
          cols,
        ),
        c * base,
        1e-12,
        `${rows}x${cols} times ${c}`,
      );
  }
  // The example: every entry 1e-200 (and 1e200); ||c 1 1^T|| = c sqrt(rows cols).
  for (const c of [1e-200, 1e200])
    relClose(spectralNorm(new Array(12).fill(c), 3, 4), c * Math.sqrt(12), 1e-12, `all ${c}`);
  assert.equal(spectralNorm(new Array(6).fill(0), 2, 3), 0);
  assert.throws(() => spectralNorm([1, Infinity], 1, 2), RangeError);
  assert.throws(() => spectralNorm([1, Number.NaN], 2, 1), RangeError);
  // The largest finite entries: ||M|| itself is in range.
  relClose(
    spectralNorm([Number.MAX_VALUE / 4, 0, 0, Number.MAX_VALUE / 8], 2, 2),
    Number.MAX_VALUE / 4,
    1e-12,
    "near MAX_VALUE",
  );
});

test("symMaxEigenvalue, symEigen and sqrtFactor scale: eigenvalues of c S are c times those of S", () => {
  const r = matrix(5, 5, 3);
  const s = new Float64Array(25);
  for (let i = 0; i < 5; i++)
    for (let j = 0; j < 5; j++) s[i * 5 + j] = r[i * 5 + j] + r[j * 5 + i];
  const top = symMaxEigenvalue(s, 5);
  const values = Float64Array.from(symEigen(s, 5).values).sort();
  for (const c of SCALES) {
    const cs = s.map((v) => v * c);
    relClose(symMaxEigenvalue(cs, 5), c * top, 1e-12, `symMaxEigenvalue times ${c}`);
    const scaled = Float64Array.from(symEigen(cs, 5).values).sort();
    for (let i = 0; i < 5; i++)
      assert.ok(
        Math.abs(scaled[i] - c * values[i]) <= 1e-12 * c * Math.abs(values[4]),
        `symEigen ${c} value ${i}`,
      );
  }
  // A PSD Gram matrix of tiny entries: the square-root factor still reproduces it.
  const m = matrix(4, 3, 8);
  for (const c of [1e-250, 1e250]) {
    const g = gramCols(m, 4, 3).map((v) => v * c);
    const f = sqrtFactor(g, 3);
    const back = gramCols(f, 3, 3, scaleExponent(f)).map((v) => v * 4 ** scaleExponent(f));
    for (let i = 0; i < 9; i++)
      assert.ok(Math.abs(back[i] - g[i]) <= 1e-12 * c * 4, `sqrtFactor ${c} entry ${i}`);
  }
});

test("gramCols / gramRows with scaleExponent: in range, exactly 4^-e M^T M", () => {
  const m = Array.from(matrix(4, 3, 5));
  const plainCols = gramCols(m, 4, 3);
  const plainRows = gramRows(m, 4, 3);
  for (const c of [1e-200, 1e200]) {
    const cm = m.map((v) => v * c);
    const e = scaleExponent(cm);
    assert.ok(2 ** e <= c && c < 2 ** (e + 2), `exponent ${e} for ${c}`);
    const gc = gramCols(cm, 4, 3, e);
    const gr = gramRows(cm, 4, 3, e);
    const f = (c / 2 ** e) ** 2;
    for (let i = 0; i < 9; i++)
      assert.ok(Math.abs(gc[i] - f * plainCols[i]) <= 1e-13 * f * 4, `gramCols ${c} ${i}`);
    for (let i = 0; i < 16; i++)
      assert.ok(Math.abs(gr[i] - f * plainRows[i]) <= 1e-13 * f * 4, `gramRows ${c} ${i}`);
  }
  assert.equal(scaleExponent([0, 0]), 0);
  assert.equal(scaleExponent([1]), 0);
  assert.equal(scaleExponent([-3]), 1);
  assert.equal(scaleExponent([5e-324]), -1074);
  assert.throws(() => scaleExponent([Infinity]), RangeError);
});

test("euclideanNorm and normalize: no underflow or overflow of the squares", () => {
  for (const c of SCALES) {
    relClose(euclideanNorm([3 * c, -4 * c]), 5 * c, 1e-15, `euclideanNorm ${c}`);
    const n = normalize([3 * c, 4 * c]);
    relClose(n.norm, 5 * c, 1e-15, `normalize ${c}`);
    assert.ok(Math.abs(n.unit[0] - 0.6) < 1e-15 && Math.abs(n.unit[1] - 0.8) < 1e-15);
  }
  assert.equal(euclideanNorm([]), 0);
  assert.equal(euclideanNorm([0, 0]), 0);
  relClose(euclideanNorm([5e-324, 5e-324]), 5e-324, 1, "subnormal"); // rounding of the result only
  assert.throws(() => euclideanNorm([1, Number.NaN]), RangeError);
});

test("symMaxEigenvalue and spectralNorm: a column of tiny entries beside entries near 1 (Householder scaled by the column)", () => {
  // Entries near 1e-160 square to subnormals; an unscaled reflector is then not orthogonal and
  // the eigenvalue was wrong (found on an L2-attention Jacobian with saturated rows).
  for (const t of [1e-150, 1e-160, 1e-170, 1e-200]) {
    const a = [1, t, 3 * t, 0, t, 2, 0, 0, 3 * t, 0, 3, 0, 0, 0, 0, 0.5];
    relClose(symMaxEigenvalue(a, 4), 3, 1e-14, `symMaxEigenvalue, tiny ${t}`);
    const m = [1, 0, t, 0, 2, 0, 2 * t, 0, 1.5];
    relClose(spectralNorm(m, 3, 3), 2, 1e-14, `spectralNorm, tiny ${t}`);
  }
});
