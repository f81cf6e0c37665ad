import { rowStats, type RowStats } from "./rowStats.ts";
import { sigmaQuadFromStats } from "./closedForm.ts";

/**
 * Exact spectral norm of the softmax Jacobian of one attention row,
 * sigma(p) = ||diag(p) - p p^T||_2 = lambda_max(diag(p) - p p^T) (docs/math.md section 1).
 *
 * Computed in float64 as the root in (p_(2), p_(1)) of the secular equation
 * sum_i p_i^2 / (p_i - lambda) = 1, by a safeguarded rational (LAPACK dlaed4-style) Newton
 * iteration started from the closed-form upper bound sigmaQuad: O(n) per iteration, a few
 * iterations, machine precision. The term of p_(1) is rewritten as
 * (lambda - p_(1) r) / (p_(1) - lambda) with r the sum of the other entries, so rows near
 * one-hot (sigma ~ 2(1 - p_(1))) keep full relative precision.
 *
 * Exact special cases: n <= 1, all-zero or one-hot rows give 0; a tie at the top
 * (p_(1) = p_(2)) gives p_(1); zero entries (masked positions) drop out.
 *
 * @param p a probability row (entries >= 0, summing to 1 up to rounding). Entries are not
 *   validated here (hot path); use `parseProbabilityRow` for user input.
 * @returns sigma in [0, 1/2].
 */
export function sigma(p: ArrayLike<number>): number {
  return sigmaFromRow(p, 0, p.length);
}

/**
 * sigma of the row data[offset .. offset + n) of a row-major buffer, masked positions
 * (mask[maskOffset + i] falsy) counting as zeros. See {@link sigma}.
 */
export function sigmaFromRow(
  data: ArrayLike<number>,
  offset: number,
  n: number,
  mask?: ArrayLike<number | boolean>,
  maskOffset: number = offset,
): number {
  const st = rowStats(data, offset, n, mask, maskOffset);
  return solveSecular(st, data, offset, mask, maskOffset);
}

const EPS = Number.EPSILON;
const MAX_ITERATIONS = 100;
/** A model step this small (relative) leaves an error of order its square: below eps. */
const CONVERGED_STEP = 1e-9;

/** psi~(mu) and its derivative for the current row, written by {@link otherTerms} (no allocation). */
const scratch = { psi: 0, slope: 0 };

/**
 * The scaled entries q_i = p_i / p_(2) of the current row's positive, unmasked entries other
 * than p_(1), gathered once per row by {@link gatherScaled} (grown as needed, never shrunk).
 * Why: each iteration then runs over a dense float64 array with no mask test, no zero test
 * and one division per entry instead of two (measured on a [12, 197, 197] map: about half the
 * time of reading the row through its mask at every iteration). The values and the order of
 * the sums are the same as before, so sigma is unchanged to the bit.
 */
let scaled = new Float64Array(256);

/** Fills {@link scaled} for a row; returns how many entries it holds. */
function gatherScaled(
  data: ArrayLike<number>,
  offset: number,
  n: number,
  topIndex: number,
  b: number,
  mask: ArrayLike<number | boolean> | undefined,
  maskOffset: number,
): number {
  if (scaled.length < n) scaled = new Float64Array(Math.max(n, 2 * scaled.length));
  let m = 0;
  for (let i = 0; i < n; i++) {
    if (i === topIndex) continue;
    const v = data[offset + i];
    if (v > 0 && (mask === undefined || mask[maskOffset + i])) scaled[m++] = v / b;
  }
  return m;
}

/**
 * The scaled secular terms of all entries but p_(1) at mu = lambda / p_(2): with
 * q_i = p_i / p_(2) (the first m entries of {@link scaled}), psi~ = sum q_i^2 / (q_i - mu)
 * and its derivative sum q_i^2 / (q_i - mu)^2.
 */
function otherTerms(m: number, mu: number): void {
  const q = scaled;
  let psi = 0;
  let slope = 0;
  for (let k = 0; k < m; k++) {
    const t = q[k] / (q[k] - mu);
    psi += q[k] * t;
    slope += t * t;
  }
  scratch.psi = psi;
  scratch.slope = slope;
}

/**
 * Secular-equation root for a row whose statistics are known; see {@link sigma}.
 *
 * Solved for mu = lambda / p_(2) in (1, p_(1) / p_(2)), so that rows whose other entries are
 * tiny (1e-160 and below, where squares underflow) keep full relative precision. Divided by
 * p_(2), the equation reads f(mu) = psi~(mu) + (mu - a r') / (a - b mu) = 0 with b = p_(2),
 * r' = r / b and psi~ the scaled terms of the other entries.
 *
 * Why not plain Newton: the poles at p_(2) and below make f concave there, so Newton
 * steps leave the bracket and bisection takes over (measured: 20 to 55 iterations at
 * n = 197). Each step here solves instead a rational model with the pole of p_(1) kept
 * exactly and psi~ replaced by A - C / (mu - 1), matched in value and slope at the iterate
 * (the "middle way" of LAPACK's dlaed4 for the outermost gap): two to four iterations to
 * machine precision. A bracket update and bisection keep it safe. The result is capped by
 * the closed forms, which are proven upper bounds, so rounding never breaks
 * sigma <= sigmaQuad <= sigmaTop2.
 */
export function solveSecular(
  st: RowStats,
  data: ArrayLike<number>,
  offset: number,
  mask?: ArrayLike<number | boolean>,
  maskOffset: number = offset,
): number {
  const { n, topIndex, a, b, r } = st;
  if (topIndex < 0 || b <= 0) return 0; // empty, all-zero or one-hot
  if (b >= a) return a; // tie at the top: p_(1) is an eigenvalue and the largest

  const quad = sigmaQuadFromStats(st);
  const rs = r / b;
  const alpha = a / b; // the top pole in mu; may be huge
  const gap = (a - b) / b;
  let lo = 1;
  // sigmaTop2 = a (r + b) is a proven upper bound and finite even when alpha overflows.
  let hi = Math.min(alpha, a * (rs + 1) * (1 + 1e-12));
  let x = quad / b;
  if (!(x > lo && x < hi)) x = lo + (hi - lo) / 2;
  let root = x;
  const m = gatherScaled(data, offset, n, topIndex, b, mask, maskOffset);
  for (let it = 0; it < MAX_ITERATIONS; it++) {
    otherTerms(m, x);
    const fx = scratch.psi + (x - a * rs) / (a - b * x);
    if (fx === 0) {
      root = x;
      break;
    }
    if (fx > 0) hi = x;
    else lo = x;
    // Model psi~ ~ A - C / d with d = mu - 1; solve A - C / d + (1 + d - a r') / (a - b - b d) = 0:
    // (1 - b A) d^2 + (A (a - b) + b C + 1 - a r') d - C (a - b) = 0, root in (0, gap).
    const dx = x - 1;
    const bigC = scratch.slope * dx * dx;
    const bigA = scratch.psi + scratch.slope * dx;
    const g = a - b;
    const c2 = 1 - b * bigA;
    const c1 = bigA * g + b * bigC + (1 - a * rs);
    const c0 = -bigC * g;
    const disc = Math.sqrt(Math.max(c1 * c1 - 4 * c2 * c0, 0));
    const d = c1 > 0 ? (-2 * c0) / (c1 + disc) : (-c1 + disc) / (2 * c2);
    let next = 1 + d;
    const modelOk = next > lo && next < hi && d < gap;
    if (!modelOk) next = lo + (hi - lo) / 2;
    root = next;
    if (modelOk && Math.abs(next - x) <= CONVERGED_STEP * next) break; // quadratic: error ~ step^2
    if (Math.abs(next - x) <= 4 * EPS * next || hi - lo <= 4 * EPS * hi) break;
    x = next;
  }
  return Math.min(b * root, quad);
}

/**
 * Unit top eigenvector v of J(p) = diag(p) - p p^T and sigma, from v_k proportional to
 * p_k / (p_k - sigma) (docs/math.md section 1). On a tie at the top (no unique eigenvector) it
 * returns the normalized difference of the first two tied positions, one valid choice.
 * Zero and masked entries get v_k = 0.
 *
 * @returns {sigma, v} with v of length n (all zeros when sigma = 0).
 */
export function sigmaEigenvector(
  data: ArrayLike<number>,
  offset = 0,
  n: number = data.length - offset,
  mask?: ArrayLike<number | boolean>,
  maskOffset: number = offset,
): { sigma: number; v: Float64Array } {
  const st = rowStats(data, offset, n, mask, maskOffset);
  const s = solveSecular(st, data, offset, mask, maskOffset);
  const v = new Float64Array(n);
  if (s === 0) return { sigma: 0, v };
  const value = (i: number) => (mask !== undefined && !mask[maskOffset + i] ? 0 : data[offset + i]);
  if (st.b >= st.a) {
    let second = -1;
    for (let i = 0; i < n; i++) if (i !== st.topIndex && value(i) === st.a) second = second < 0 ? i : second;
    v[st.topIndex] = Math.SQRT1_2;
    v[second] = -Math.SQRT1_2;
    return { sigma: s, v };
  }
  let norm2 = 0;
  for (let i = 0; i < n; i++) {
    const p = value(i);
    if (p > 0) {
      // The top entry's denominator a - sigma is computed directly: it is the largest gap.
      const vi = p / (p - s);
      v[i] = vi;
      norm2 += vi * vi;
    }
  }
  const inv = 1 / Math.sqrt(norm2);
  for (let i = 0; i < n; i++) v[i] *= inv;
  return { sigma: s, v };
}

/**
 * Gradient of sigma(p) with respect to each entry of p (the entries treated as free
 * variables, as backpropagation through softmax needs): d sigma / d p_k = v_k^2 - 2 (p.v) v_k
 * with v the unit top eigenvector (docs/math.md section 1). At a tie at the top sigma is not
 * differentiable and this returns one subgradient.
 *
 * @returns {sigma, grad} with grad of length n (zeros at zero and masked entries).
 */
export function sigmaGradient(
  data: ArrayLike<number>,
  offset = 0,
  n: number = data.length - offset,
  mask?: ArrayLike<number | boolean>,
  maskOffset: number = offset,
): { sigma: number; grad: Float64Array } {
  const { sigma: s, v } = sigmaEigenvector(data, offset, n, mask, maskOffset);
  let pv = 0;
  for (let i = 0; i < n; i++) {
    if (v[i] !== 0) pv += data[offset + i] * v[i];
  }
  const grad = new Float64Array(n);
  for (let i = 0; i < n; i++) grad[i] = v[i] * v[i] - 2 * pv * v[i];
  return { sigma: s, grad };
}
