import { exponentOf, times2 } from "./floatScale.ts";

/**
 * The largest eigenvalue of a symmetric matrix from above (docs/math.md sections 2-3: every
 * spectral norm of a bound is the square root of one), and the Cholesky test that certifies
 * an upper bound. Matrices are row-major Float64Arrays; linalg.ts re-exports both functions.
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
 * @example symMaxEigenvalue([2, 1, 1, 2], 2) // 3 (plus a few ulps: never below)
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
  // of the reduction stay in range (see the note on squaring in floatScale.ts).
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
 * Whether c I - S is positive definite for symmetric S [d, d] (an LDL^T factorization with all
 * pivots > 0), i.e. lambda_max(S) < c. `work` [d, d] is scratch (overwritten).
 *
 * @example belowCertified(Float64Array.of(2, 1, 1, 2), 2, 3.1, new Float64Array(4)) // true (lambda_max 3)
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
