import { exponentOf, maxAbs, times2 } from "./floatScale.ts";
import { symMaxEigenvalue } from "./maxEigenvalue.ts";

export { belowCertified, symMaxEigenvalue } from "./maxEigenvalue.ts";

/**
 * Small dense float64 linear algebra for the Lipschitz rules (docs/math.md sections 2-3): Gram
 * matrices, the largest eigenvalue of a symmetric matrix, spectral norms, and a square-root
 * factor of a Gram matrix. Matrices are row-major Float64Arrays.
 *
 * Why our own and not a library: a bound must never be UNDER the truth, and tfjs works in
 * float32; src/lipschitz/maxEigenvalue.ts, which computes the largest eigenvalue (re-exported
 * here), says why in full. Every helper first scales by a power of two where squares could
 * leave float64's range (src/lipschitz/floatScale.ts).
 */

/** Machine epsilon of float64. */
const EPS = Number.EPSILON;

/**
 * Euclidean norm of a vector without overflow or underflow of the squares (dnrm2's idea: scale
 * by a power of two near the largest magnitude, then sum squares).
 *
 * @param v any length (0 gives 0).
 * @returns ||v||_2, exact to a few ulps whenever the result itself is a normal float64.
 * @throws RangeError on a non-finite entry.
 * @example euclideanNorm([3e-200, 4e-200]) // 5e-200 (squaring first would give 0)
 */
export function euclideanNorm(v: ArrayLike<number>): number {
  const m = maxAbs(v, v.length, "euclideanNorm");
  if (m === 0) return 0;
  const e = exponentOf(m);
  let s = 0;
  if (-e >= -1022 && -e <= 1023) {
    // times2's one-factor case with the factor hoisted: the same products, no call per entry.
    const f = 2 ** -e;
    for (let i = 0; i < v.length; i++) {
      const a = v[i] * f;
      s += a * a;
    }
  } else
    for (let i = 0; i < v.length; i++) {
      const a = times2(v[i], -e);
      s += a * a;
    }
  return times2(Math.sqrt(s), e);
}

/**
 * The exponent e of a power of two near the largest |entry| of a matrix or vector (2^e <= max
 * < 2^(e+1); 0 for an all-zero or empty input), for the `exponent` argument of
 * {@link gramCols} and {@link gramRows}: entries times 2^-e lie in (-2, 2), so their squares
 * neither overflow nor underflow.
 *
 * @throws RangeError on a non-finite entry.
 * @example scaleExponent([1e200, -3]) // 664 (2^664 ~ 1.9e199)
 */
export function scaleExponent(m: ArrayLike<number>): number {
  const top = maxAbs(m, m.length, "scaleExponent");
  return top === 0 ? 0 : exponentOf(top);
}

/** The first `count` entries of m times 2^-exponent (exact), as a new Float64Array. */
function scaledCopy(m: ArrayLike<number>, count: number, exponent: number): Float64Array {
  const out = new Float64Array(count);
  for (let i = 0; i < count; i++) out[i] = times2(m[i], -exponent);
  return out;
}

/**
 * The Gram matrix M^T M of a rows x cols matrix, of M scaled by 2^-exponent.
 *
 * The entries are squared: for |entries| above about 1e154 the Gram matrix overflows and below
 * about 1e-154 it underflows, because its true entries are out of float64's range. Pass
 * exponent = {@link scaleExponent}(m) to get 4^-exponent M^T M, in range (the scaling is
 * exact); {@link spectralNorm} does so.
 *
 * @param m row-major [rows, cols].
 * @param exponent entries are multiplied by 2^-exponent before squaring (default 0: M^T M).
 * @returns Float64Array [cols, cols] (symmetric).
 */
export function gramCols(
  m: ArrayLike<number>,
  rows: number,
  cols: number,
  exponent = 0,
): Float64Array {
  if (exponent !== 0) return gramCols(scaledCopy(m, rows * cols, exponent), rows, cols);
  // M^T M is the row Gram matrix of M^T: transposed once (O(rows cols), exact), so the products
  // run as the blocked dot products of rowGram, in the same order as before (bit-identical).
  const t =
    m instanceof Float32Array ? new Float32Array(rows * cols) : new Float64Array(rows * cols);
  for (let r = 0; r < rows; r++) {
    const o = r * cols;
    for (let i = 0; i < cols; i++) t[i * rows + r] = m[o + i];
  }
  return rowGram(t, cols, rows);
}

/**
 * The Gram matrix M M^T of a rows x cols matrix, of M scaled by 2^-exponent (see
 * {@link gramCols} on the range of the squares).
 *
 * @param m row-major [rows, cols].
 * @param exponent entries are multiplied by 2^-exponent before squaring (default 0: M M^T).
 * @returns Float64Array [rows, rows] (symmetric).
 */
export function gramRows(
  m: ArrayLike<number>,
  rows: number,
  cols: number,
  exponent = 0,
): Float64Array {
  if (exponent !== 0) return gramRows(scaledCopy(m, rows * cols, exponent), rows, cols);
  return rowGram(m, rows, cols);
}

/**
 * T T^T for row-major T [rows, cols] ({@link rowDots} on the upper triangle, mirrored): about
 * 2x a plain loop on a 768 x 3072 weight matrix (the Gram matrices of weight spectral norms were
 * most of a BERT-base analysis; docs/performance.md).
 */
function rowGram(t: ArrayLike<number>, rows: number, cols: number): Float64Array {
  const g = rowDots(t, rows, t, rows, cols, true);
  // The upper triangle mirrored down.
  for (let a = 0; a < rows; a++)
    for (let b = a + 1; b < rows; b++) g[b * rows + a] = g[a * rows + b];
  return g;
}

/**
 * A B^T for row-major A [ra, cols], B [rb, cols]: [ra, rb], each entry a dot product summed
 * over k in order (the same rounding as a plain loop), two rows of A against two rows of B at a
 * time, so each loaded entry serves two products. With `upper` (A = B, a Gram matrix) only the
 * entries j >= i are computed (the rest stay 0).
 *
 * @example rowDots([1, 2], 1, [3, 4, 5, 6], 2, 2) // [11, 17]
 */
export function rowDots(
  a: ArrayLike<number>,
  ra: number,
  b: ArrayLike<number>,
  rb: number,
  cols: number,
  upper = false,
): Float64Array {
  const g = new Float64Array(ra * rb);
  let i = 0;
  for (; i + 1 < ra; i += 2) {
    const oi = i * cols;
    const oi1 = oi + cols;
    let j = upper ? i : 0;
    for (; j + 1 < rb; j += 2) {
      const oj = j * cols;
      const oj1 = oj + cols;
      let s00 = 0;
      let s01 = 0;
      let s10 = 0;
      let s11 = 0;
      for (let k = 0; k < cols; k++) {
        const a0 = a[oi + k];
        const a1 = a[oi1 + k];
        const b0 = b[oj + k];
        const b1 = b[oj1 + k];
        s00 += a0 * b0;
        s01 += a0 * b1;
        s10 += a1 * b0;
        s11 += a1 * b1;
      }
      g[i * rb + j] = s00;
      g[i * rb + j + 1] = s01;
      g[(i + 1) * rb + j] = s10;
      g[(i + 1) * rb + j + 1] = s11;
    }
    for (; j < rb; j++) {
      const oj = j * cols;
      let s0 = 0;
      let s1 = 0;
      for (let k = 0; k < cols; k++) {
        const bk = b[oj + k];
        s0 += a[oi + k] * bk;
        s1 += a[oi1 + k] * bk;
      }
      g[i * rb + j] = s0;
      g[(i + 1) * rb + j] = s1;
    }
  }
  for (; i < ra; i++)
    for (let j = upper ? i : 0; j < rb; j++) {
      let s = 0;
      for (let k = 0; k < cols; k++) s += a[i * cols + k] * b[j * cols + k];
      g[i * rb + j] = s;
    }
  return g;
}

/**
 * C = A B for A [r, k], B [k, c].
 *
 * @returns Float64Array [r, c].
 * @example matMul([1, 2], [3, 4], 1, 2, 1) // [11]
 */
export function matMul(
  a: ArrayLike<number>,
  b: ArrayLike<number>,
  r: number,
  k: number,
  c: number,
): Float64Array {
  const out = new Float64Array(r * c);
  matMulInto(a, b, out, r, k, c);
  return out;
}

/**
 * out = A B for A [r, k], B [k, c] (row-major), four terms of the sum at a time: the inner
 * loop of the exact MLP and row-wise rules, where plain loops cost 2-3x more.
 *
 * @param out [r, c], overwritten.
 * @example matMulInto(a, b, out, d, hidden, d)
 */
export function matMulInto(
  a: ArrayLike<number>,
  b: ArrayLike<number>,
  out: Float64Array,
  r: number,
  k: number,
  c: number,
): void {
  out.fill(0, 0, r * c);
  const k4 = k - (k % 4);
  for (let i = 0; i < r; i++) {
    const ai = i * k;
    const oi = i * c;
    let u = 0;
    for (; u < k4; u += 4) {
      const t0 = a[ai + u];
      const t1 = a[ai + u + 1];
      const t2 = a[ai + u + 2];
      const t3 = a[ai + u + 3];
      const o0 = u * c;
      const o1 = o0 + c;
      const o2 = o1 + c;
      const o3 = o2 + c;
      for (let j = 0; j < c; j++)
        out[oi + j] += t0 * b[o0 + j] + t1 * b[o1 + j] + t2 * b[o2 + j] + t3 * b[o3 + j];
    }
    for (; u < k; u++) {
      const t = a[ai + u];
      const o = u * c;
      for (let j = 0; j < c; j++) out[oi + j] += t * b[o + j];
    }
  }
}

/**
 * out = M M^T for a square M [d, d] (row-major), dot products four terms at a time.
 *
 * @param out [d, d], overwritten (symmetric).
 * @example gramRowsInto(m, d, gram); symMaxEigenvalue(gram, d) // ||M||^2
 */
export function gramRowsInto(m: ArrayLike<number>, d: number, out: Float64Array): void {
  for (let a = 0; a < d; a++) {
    const oa = a * d;
    for (let b = a; b < d; b++) {
      const ob = b * d;
      let s0 = 0;
      let s1 = 0;
      let s2 = 0;
      let s3 = 0;
      let c = 0;
      for (; c + 3 < d; c += 4) {
        s0 += m[oa + c] * m[ob + c];
        s1 += m[oa + c + 1] * m[ob + c + 1];
        s2 += m[oa + c + 2] * m[ob + c + 2];
        s3 += m[oa + c + 3] * m[ob + c + 3];
      }
      for (; c < d; c++) s0 += m[oa + c] * m[ob + c];
      const s = s0 + s1 + s2 + s3;
      out[oa + b] = s;
      out[ob + a] = s;
    }
  }
}

/**
 * F G F^T for F [r, m] and symmetric G [m, m].
 *
 * @returns Float64Array [r, r] (symmetric).
 */
export function congruence(
  f: ArrayLike<number>,
  g: ArrayLike<number>,
  r: number,
  m: number,
): Float64Array {
  const fg = matMul(f, g, r, m, m);
  const out = new Float64Array(r * r);
  for (let i = 0; i < r; i++)
    for (let j = i; j < r; j++) {
      let s = 0;
      for (let k = 0; k < m; k++) s += fg[i * m + k] * f[j * m + k];
      out[i * r + j] = s;
      out[j * r + i] = s;
    }
  return out;
}

/**
 * Spectral norm (largest singular value) of a rows x cols matrix, from the Gram matrix of its
 * smaller side and {@link symMaxEigenvalue}, after scaling M by a power of two near its largest
 * |entry| (exact), so that entries of 1e-200 or 1e200 give the right value instead of 0 or a
 * RangeError (the squares of the Gram matrix would underflow or overflow).
 *
 * @param m row-major [rows, cols]. @returns ||M||_2 >= 0 (0 for an empty matrix), never
 *   below the exact value by more than rounding.
 * @throws RangeError on non-finite entries or when m does not have rows * cols entries.
 * @example spectralNorm([3e200, 0, 0, 4e200], 2, 2) // 4e200
 */
export function spectralNorm(m: ArrayLike<number>, rows: number, cols: number): number {
  if (m.length !== rows * cols)
    throw new RangeError(`spectralNorm: expected ${rows} x ${cols} entries, got ${m.length}`);
  if (rows === 0 || cols === 0) return 0;
  // Scale before squaring: ||M|| = 2^e ||2^-e M||, and the Gram matrix of 2^-e M is in range.
  // Within 2^+-400 the squares are safe as they are (scaling would give the same bits).
  const top = scaleExponent(m);
  const e = Math.abs(top) <= 400 ? 0 : top;
  const g = cols <= rows ? gramCols(m, rows, cols, e) : gramRows(m, rows, cols, e);
  return times2(Math.sqrt(Math.max(symMaxEigenvalue(g, Math.min(rows, cols)), 0)), e);
}

/**
 * Eigen-decomposition of a small symmetric matrix by the cyclic Jacobi method (exact to
 * rounding; used for the square-root factors of weight Gram matrices, computed once per model).
 *
 * @param a row-major [m, m] symmetric; not modified. Scaled by a power of two before the
 *   sweeps (exact), so entries near 1e-200 or 1e200 work as well as entries near 1.
 * @returns eigenvalues [m] and eigenvectors as the COLUMNS of a row-major [m, m] matrix.
 * @throws RangeError when a does not have m * m entries or has a non-finite entry.
 */
export function symEigen(
  a: ArrayLike<number>,
  m: number,
): { values: Float64Array; vectors: Float64Array } {
  if (a.length !== m * m)
    throw new RangeError(`symEigen: expected ${m} x ${m} entries, got ${a.length}`);
  // Scaled by a power of two near the largest |entry| (exact): the sweep test squares entries.
  const e = scaleExponent(a);
  const w = Float64Array.from({ length: m * m }, (_, i) => times2(a[i], -e));
  const u = new Float64Array(m * m);
  for (let i = 0; i < m; i++) u[i * m + i] = 1;
  // Stopping rule: a pair whose |a_pq| is at most EPS sqrt(|a_pp a_qq|) (or negligible against the
  // whole matrix) is already diagonal to rounding and is not rotated (Demmel & Veselic 1992,
  // "Jacobi's method is more accurate than QR"; Golub & Van Loan 8.5), and the sweeps stop when
  // one rotates no pair. An earlier test on the off-diagonal mass (below 1e-2 EPS^2 of the
  // total) is below what rounding lets the sweeps reach (they stall near EPS^2): it ran every
  // decomposition of a 64 x 64 head Gram matrix to the 100-sweep cap instead of about 10 sweeps,
  // with the same result to rounding.
  let total = 0;
  for (let i = 0; i < m * m; i++) total += w[i] * w[i];
  const negligible = EPS * EPS * Math.sqrt(total);
  for (let sweep = 0; sweep < 100; sweep++) {
    let rotated = 0;
    for (let p = 0; p < m - 1; p++)
      for (let q = p + 1; q < m; q++) {
        const apq = w[p * m + q];
        if (apq === 0) continue;
        const app = w[p * m + p];
        const aqq = w[q * m + q];
        if (Math.abs(apq) <= EPS * Math.sqrt(Math.abs(app * aqq)) || Math.abs(apq) <= negligible)
          continue;
        rotated++;
        const theta = (aqq - app) / (2 * apq);
        const t = Math.sign(theta || 1) / (Math.abs(theta) + Math.sqrt(theta * theta + 1));
        const c = 1 / Math.sqrt(t * t + 1);
        const s = t * c;
        for (let k = 0; k < m; k++) {
          const akp = w[k * m + p];
          const akq = w[k * m + q];
          w[k * m + p] = c * akp - s * akq;
          w[k * m + q] = s * akp + c * akq;
        }
        for (let k = 0; k < m; k++) {
          const apk = w[p * m + k];
          const aqk = w[q * m + k];
          w[p * m + k] = c * apk - s * aqk;
          w[q * m + k] = s * apk + c * aqk;
        }
        for (let k = 0; k < m; k++) {
          const ukp = u[k * m + p];
          const ukq = u[k * m + q];
          u[k * m + p] = c * ukp - s * ukq;
          u[k * m + q] = s * ukp + c * ukq;
        }
      }
    if (rotated === 0) break;
  }
  const values = new Float64Array(m);
  for (let i = 0; i < m; i++) values[i] = times2(w[i * m + i], e);
  return { values, vectors: u };
}

/**
 * A square-root factor of a symmetric PSD matrix: F [m, m] with F^T F = G (F = Lambda^(1/2) U^T
 * from {@link symEigen}; negative rounding eigenvalues clamped to 0). Then ||M x|| = ||F x||
 * for every x whenever G = M^T M, so ||M B||_2 = ||F B||_2 for any B: norms of products with a
 * tall weight matrix reduce to m x m problems.
 *
 * @param g row-major [m, m] symmetric PSD. @returns Float64Array [m, m].
 */
export function sqrtFactor(g: ArrayLike<number>, m: number): Float64Array {
  const { values, vectors } = symEigen(g, m);
  const f = new Float64Array(m * m);
  for (let i = 0; i < m; i++) {
    const s = Math.sqrt(Math.max(values[i], 0));
    for (let k = 0; k < m; k++) f[i * m + k] = s * vectors[k * m + i];
  }
  return f;
}
