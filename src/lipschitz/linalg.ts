import { NonFiniteError } from "../util/errors.ts";
/**
 * Small dense float64 linear algebra for the Lipschitz rules (docs/math.md sections 2-3): Gram
 * matrices, the largest eigenvalue of a symmetric matrix, spectral norms, and a square-root
 * factor of a Gram matrix. Matrices are row-major Float64Arrays.
 *
 * Why our own and not a library: spectral norms are the core of every bound, and a bound must
 * never be UNDER the truth. Power iteration converges from below (an underestimate breaks
 * validity unless run to full convergence, which is slow when the top eigenvalues are close),
 * so the largest eigenvalue here comes from a Householder tridiagonalization (backward stable)
 * and Sturm-sequence bisection, which brackets it to machine precision and returns the upper end
 * of the bracket. ml-matrix is a devDependency (tests only), and tfjs works in float32.
 */

/** Machine epsilon of float64. */
const EPS = Number.EPSILON;

/**
 * Squaring is where float64 breaks first: an entry below about 1e-154 squares to 0 (or to a
 * subnormal that has lost its digits) and one above about 1e154 squares to Infinity. Every
 * norm, Gram matrix and eigenvalue helper here therefore first divides its input by a power
 * of two near its largest magnitude (as LAPACK's dnrm2 scales), works on entries of size about
 * 1, and multiplies the result back. Powers of two are exact in binary floating point, so for
 * inputs that never came near the limits the results are the same to the last bit (the Gram
 * and eigenvalue paths skip the scaling when the largest magnitude is within 2^+-400, where it
 * would change nothing).
 */

/** Largest |entry| of the first `count` entries of a (0 when empty). @throws RangeError on a non-finite entry. */
function maxAbs(a: ArrayLike<number>, count: number, name: string): number {
  let m = 0;
  for (let i = 0; i < count; i++) {
    const v = Math.abs(a[i]);
    if (!(v <= Number.MAX_VALUE))
      throw new NonFiniteError(
        `${name}: non-finite entry ${a[i]} at ${i} (the model's values overflow: weights or inputs far too large?)`,
      );
    if (v > m) m = v;
  }
  return m;
}

/**
 * The power-of-two exponent e with 2^e <= m < 2^(e+1) for finite m > 0 (subnormals included),
 * so that m * 2^-e lies in [1, 2).
 */
function exponentOf(m: number): number {
  let e = Math.floor(Math.log2(m));
  // Math.log2 may round across a power of two; correct by one step either way.
  if (times2(m, -e) >= 2) e++;
  else if (times2(m, -e) < 1) e--;
  return e;
}

/**
 * x * 2^e without overflow or underflow of the factor itself: 2^e alone is not representable
 * for e > 1023 or e < -1074, so the factor is applied in two halves (each exact).
 */
function times2(x: number, e: number): number {
  if (e >= -1022 && e <= 1023) return x * 2 ** e;
  const half = Math.trunc(e / 2);
  return x * 2 ** half * 2 ** (e - half);
}

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
 * The largest eigenvalue of a symmetric m x m matrix, from above.
 *
 * From m = 256 (weight Gram matrices) a Lanczos estimate certified by a Cholesky factorization
 * is tried first ({@link lanczosCertified}: never below the exact value, and above it by at most
 * about 2e-10 |lambda_max| + 1e-12 max|a_ij|: 2e-10 relative for a Gram matrix, whose largest
 * eigenvalue is its scale); where the certificate fails, and below that size, the following
 * reduction runs.
 * Householder reduction to tridiagonal form (O(m^3), backward stable), then bisection with
 * Sturm counts on the Gershgorin interval of the tridiagonal matrix until the bracket is at
 * machine precision; the upper end of the bracket is returned, plus a relative margin of
 * 8 m eps for the rounding of the reduction (so the result is >= the exact value up to
 * rounding that is far below any test tolerance). The matrix is first scaled by a power of two
 * near its largest |entry| (exact), so entries of 1e-200 or 1e200 work: the reduction and the
 * Sturm counts square entries.
 *
 * @param a row-major [m, m], symmetric (only the lower triangle is read); not modified.
 * @param m size, >= 0 (0 gives 0).
 * @returns lambda_max (for a PSD Gram matrix: the squared spectral norm).
 * @throws RangeError when a has fewer than m*m entries or contains a non-finite value.
 */
export function symMaxEigenvalue(a: ArrayLike<number>, m: number): number {
  if (m === 0) return 0;
  if (a.length < m * m)
    throw new RangeError(`symMaxEigenvalue: expected ${m * m} entries, got ${a.length}`);
  if (m === 1) {
    if (!Number.isFinite(a[0])) throw new RangeError("symMaxEigenvalue: non-finite entry");
    return a[0];
  }
  // Lower triangle only (w[i * m + j], j <= i), scaled by a power of two so that the squares
  // of the reduction stay in range (see the note on squaring above).
  const w = new Float64Array(m * m);
  let top = 0;
  for (let i = 0; i < m; i++)
    for (let j = 0; j <= i; j++) {
      const v = a[i * m + j];
      const abs = Math.abs(v);
      if (!(abs <= Number.MAX_VALUE)) throw new RangeError("symMaxEigenvalue: non-finite entry");
      if (abs > top) top = abs;
      w[i * m + j] = v;
    }
  if (top === 0) return 0;
  // Within 2^+-400 the squares are safe as they are (scaling would give the same bits).
  const e0 = exponentOf(top);
  const e = Math.abs(e0) <= 400 ? 0 : e0;
  if (e !== 0) for (let i = 0; i < m * m; i++) w[i] = times2(w[i], -e);
  const certified =
    m >= CERTIFY_FROM ? lanczosCertified(w, m, e === 0 ? top : times2(top, -e)) : null;
  if (certified !== null) return e === 0 ? certified : times2(certified, e);
  const diag = new Float64Array(m);
  const off = new Float64Array(m); // off[i] couples i and i + 1
  tridiagonalize(w, m, diag, off);
  const top1 = tridiagMaxEigenvalue(diag, off, m);
  return e === 0 ? top1 : times2(top1, e);
}

/**
 * Sizes from which {@link lanczosCertified} is tried first: below about 256 the Ritz value needs
 * nearly m steps on a weight Gram matrix's dense spectrum and the reduction is faster (64 x 64:
 * 0.25 ms against 0.5 ms); at 768 the certificate takes 0.38 s against 0.62 s.
 */
const CERTIFY_FROM = 256;

/**
 * lambda_max of the symmetric matrix whose lower triangle is in w [m, m], from above, by a
 * certificate instead of a full reduction: Lanczos (full reorthogonalization, from a fixed start,
 * until its top Ritz value theta changes by less than 1e-13 relative over 8 steps, at most
 * min(m, 240) steps) gives theta <= lambda_max up to rounding, and a Cholesky factorization of
 * B = t I - A with t = theta + 2e-10 |theta| + 1e-13 max|a_ij| that completes with positive pivots proves
 * lambda_max < t up to its rounding: a completed floating-point Cholesky factorization is
 * exact for B + E with |E| <= gamma_{m+1} |R^T| |R| (Demmel; Higham, Accuracy and Stability of
 * Numerical Algorithms, Theorem 10.5), so ||E||_2 <= gamma_{m+1} ||R||_F^2 and
 * ||R||_F^2 = tr(B + E) <= tr(B) / (1 - gamma_{m+1}); forming t - a_ii adds at most
 * u |t - a_ii| on the diagonal. The result, t + gamma_{m+1} tr(B) / (1 - gamma_{m+1}) +
 * u max_i |t - a_ii| (rounded up), is never below lambda_max and above it by at most about
 * 2e-10 |lambda_max| + 1e-12 max|a_ij| (an independent float64 check against numpy on 32
 * matrices of sizes 256-3072, offsets and scalings of 1e+-300 included: +1e-10 to +2.6e-10 for
 * Gram matrices; where lambda_max is far below the entries, 6e-13 of max|a_ij|). Cholesky costs m^3 / 6 multiply-adds against the reduction's 4 m^3 / 3, Lanczos m^2
 * per step.
 *
 * @param top max |a_ij| of the lower triangle in w.
 * @returns the certified bound, or null when the certificate fails (Lanczos not converged to
 *   2e-10, or its start nearly orthogonal to the top eigenvector): the caller then reduces.
 */
function lanczosCertified(w: Float64Array, m: number, top: number): number | null {
  const steps = Math.min(m, 240);
  const basis = new Float64Array(steps * m);
  const alpha = new Float64Array(steps);
  const beta = new Float64Array(steps);
  const y = new Float64Array(m);
  // A fixed start with every component nonzero and no structure shared with typical matrices.
  let norm = 0;
  for (let i = 0; i < m; i++) {
    basis[i] = 1 + 0.5 * Math.sin(1.7 * i + 0.3);
    norm += basis[i] * basis[i];
  }
  norm = Math.sqrt(norm);
  for (let i = 0; i < m; i++) basis[i] /= norm;
  let k = 0;
  let scale = 0;
  let settled = NaN;
  for (; k < steps; k++) {
    const v = basis.subarray(k * m, (k + 1) * m);
    // y = A v from the lower triangle.
    y.fill(0);
    for (let i = 0; i < m; i++) {
      const row = i * m;
      const vi = v[i];
      let acc = w[row + i] * vi;
      for (let j = 0; j < i; j++) {
        const a = w[row + j];
        acc += a * v[j];
        y[j] += a * vi;
      }
      y[i] += acc;
    }
    let a = 0;
    for (let i = 0; i < m; i++) a += v[i] * y[i];
    alpha[k] = a;
    // Full reorthogonalization against the basis, twice (Kahan's "twice is enough").
    for (let pass = 0; pass < 2; pass++)
      for (let q = 0; q <= k; q++) {
        const b = basis.subarray(q * m, (q + 1) * m);
        let c = 0;
        for (let i = 0; i < m; i++) c += b[i] * y[i];
        for (let i = 0; i < m; i++) y[i] -= c * b[i];
      }
    let bn = 0;
    for (let i = 0; i < m; i++) bn += y[i] * y[i];
    bn = Math.sqrt(bn);
    scale = Math.max(scale, Math.abs(a) + bn);
    if (k + 1 === steps || bn <= 1e-14 * scale) {
      k++;
      break;
    }
    // Every 8 steps: stop once the top Ritz value has settled.
    if ((k + 1) % 8 === 0) {
      const now = tridiagMaxEigenvalue(alpha, beta, k + 1);
      if (Math.abs(now - settled) <= 1e-13 * Math.abs(now)) {
        k++;
        break;
      }
      settled = now;
    }
    beta[k] = bn;
    const next = basis.subarray((k + 1) * m, (k + 2) * m);
    for (let i = 0; i < m; i++) next[i] = y[i] / bn;
  }
  const theta = tridiagMaxEigenvalue(alpha, beta, k);
  if (!Number.isFinite(theta)) return null;
  const t = theta + 2e-10 * Math.abs(theta) + 1e-13 * top;
  // Cholesky of B = t I - A (lower triangle), rows in place of a scratch copy.
  const r = new Float64Array(m * m);
  let traceB = 0;
  let diagErr = 0;
  for (let i = 0; i < m; i++) {
    const oi = i * m;
    for (let j = 0; j <= i; j++) {
      const oj = j * m;
      let v = i === j ? t - w[oi + i] : -w[oi + j];
      if (i === j) {
        traceB += v;
        diagErr = Math.max(diagErr, Math.abs(v));
      }
      for (let q = 0; q < j; q++) v -= r[oi + q] * r[oj + q];
      if (i === j) {
        if (!(v > 0)) return null;
        r[oi + i] = Math.sqrt(v);
      } else r[oi + j] = v / r[oj + j];
    }
  }
  const u = EPS / 2;
  const gamma = ((m + 1) * u) / (1 - (m + 1) * u);
  const bound = t + (gamma * traceB) / (1 - gamma) + u * diagErr;
  return bound * (1 + 4 * u);
}

/**
 * Householder reduction of the symmetric matrix whose lower triangle is in w (overwritten) to
 * tridiagonal form: diagonal into diag, off-diagonal into off.
 */
function tridiagonalize(w: Float64Array, m: number, diag: Float64Array, off: Float64Array): void {
  const v = new Float64Array(m);
  const p = new Float64Array(m);
  for (let k = 0; k < m - 2; k++) {
    // The column is scaled by its largest |entry| before squaring: a column of entries near
    // 1e-180 (beside entries near 1) would otherwise give denormal or zero squares, and a
    // reflector that is not orthogonal.
    let colMax = 0;
    for (let i = k + 1; i < m; i++) colMax = Math.max(colMax, Math.abs(w[i * m + k]));
    if (colMax === 0) {
      off[k] = 0;
      continue;
    }
    let norm2 = 0;
    for (let i = k + 1; i < m; i++) norm2 += (w[i * m + k] / colMax) ** 2;
    const x0 = w[(k + 1) * m + k] / colMax;
    const norm = Math.sqrt(norm2);
    const alpha = x0 > 0 ? -norm : norm;
    // v = x - alpha e1 (x scaled), normalized; H = I - 2 v v^T maps x to alpha colMax e1.
    let vn2 = 0;
    for (let i = k + 1; i < m; i++) {
      const vi = w[i * m + k] / colMax - (i === k + 1 ? alpha : 0);
      v[i] = vi;
      vn2 += vi * vi;
    }
    off[k] = alpha * colMax;
    if (vn2 === 0) continue;
    const inv = 1 / Math.sqrt(vn2);
    for (let i = k + 1; i < m; i++) v[i] *= inv;
    // A' = A - 2 v w^T - 2 w v^T with p = A v, K = v^T p, w = p - K v (trailing block only).
    for (let i = k + 1; i < m; i++) p[i] = 0;
    for (let i = k + 1; i < m; i++) {
      const row = i * m;
      const vi = v[i];
      let s = w[row + i] * vi;
      for (let j = k + 1; j < i; j++) {
        const aij = w[row + j];
        s += aij * v[j];
        p[j] += aij * vi;
      }
      p[i] += s;
    }
    let kk = 0;
    for (let i = k + 1; i < m; i++) kk += v[i] * p[i];
    for (let i = k + 1; i < m; i++) p[i] -= kk * v[i];
    for (let i = k + 1; i < m; i++) {
      const row = i * m;
      const vi2 = 2 * v[i];
      const pi2 = 2 * p[i];
      for (let j = k + 1; j <= i; j++) w[row + j] -= vi2 * p[j] + pi2 * v[j];
    }
  }
  for (let i = 0; i < m; i++) diag[i] = w[i * m + i];
  off[m - 2] = w[(m - 1) * m + (m - 2)];
}

/** Largest eigenvalue of a symmetric tridiagonal matrix from above (Sturm bisection). */
function tridiagMaxEigenvalue(diag: Float64Array, off: Float64Array, m: number): number {
  // Gershgorin interval of the tridiagonal matrix.
  let lo = Infinity;
  let hi = -Infinity;
  for (let i = 0; i < m; i++) {
    const r = (i > 0 ? Math.abs(off[i - 1]) : 0) + (i < m - 1 ? Math.abs(off[i]) : 0);
    lo = Math.min(lo, diag[i] - r);
    hi = Math.max(hi, diag[i] + r);
  }
  const scale = Math.max(Math.abs(lo), Math.abs(hi));
  if (scale === 0) return 0;
  const tiny = scale * EPS * EPS;
  const off2 = new Float64Array(m);
  for (let i = 0; i < m - 1; i++) off2[i] = off[i] * off[i];
  for (let it = 0; it < 200 && hi - lo > 2 * EPS * scale; it++) {
    const mid = lo + (hi - lo) / 2;
    if (mid <= lo || mid >= hi) break;
    // Number of eigenvalues strictly below mid (Sturm sequence of the LDL^T pivots).
    let count = 0;
    let q = diag[0] - mid;
    if (q === 0) q = -tiny;
    if (q < 0) count++;
    for (let i = 1; i < m; i++) {
      q = diag[i] - mid - off2[i - 1] / q;
      if (q === 0) q = -tiny;
      if (q < 0) count++;
    }
    if (count === m) hi = mid;
    else lo = mid;
  }
  return hi + 8 * m * EPS * scale;
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

/**
 * Whether c I - S is positive definite for symmetric S [d, d] (an LDL^T factorization with all
 * pivots > 0), i.e. lambda_max(S) < c. `work` [d, d] is scratch.
 */
export function belowCertified(s: Float64Array, d: number, c: number, work: Float64Array): boolean {
  // Cholesky of A = c I - S, lower factor in work (row-major).
  for (let i = 0; i < d; i++) {
    const oi = i * d;
    for (let j = 0; j <= i; j++) {
      const oj = j * d;
      let v = (i === j ? c : 0) - s[oi + j];
      for (let k = 0; k < j; k++) v -= work[oi + k] * work[oj + k];
      if (i === j) {
        if (!(v > 0)) return false;
        work[oi + i] = Math.sqrt(v);
      } else work[oi + j] = v / work[oj + j];
    }
  }
  return true;
}
