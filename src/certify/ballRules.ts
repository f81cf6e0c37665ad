import { GELU_DERIVATIVE_MAX, GELU_ERF_DERIVATIVE_MAX } from "../nn/gelu.ts";

/**
 * The over-the-ball rules of docs/math.md section 7, as plain float64 functions: each bounds a
 * quantity over every input of a ball B(x0, r) (Frobenius norm of the layer input) from the
 * values at the centre x0 and the radius r. The layer records (ballLayers.ts) compose them.
 * Everything here is monotone non-decreasing in r (a bound at r holds at every smaller radius),
 * which is what the certified radius's bisection needs.
 */

/** How the softmax Jacobian's norm is bounded over the ball: from the probability box, or 1/2. */
export type SigmaRule = "dist" | "half";

/** Both rules, in the order the files list them. */
export const SIGMA_RULES: readonly SigmaRule[] = ["dist", "half"];

/**
 * The largest LayerNorm Jacobian norm over a ball, for one row: max|gamma| / sqrt(v + eps) with
 * v = max(std0 - rho / sqrt(d), 0)^2 the smallest variance a row within rho of the centre row
 * can have (the standard deviation of a row is (1/sqrt d)-Lipschitz in the row: it is
 * ||(I - 11^T/d) x|| / sqrt(d)).
 *
 * @param std0 the centre row's standard deviation (population, as LayerNorm computes it).
 * @param rho how far the row may move (l_2); @param d the row's width; @param eps LayerNorm's eps.
 * @param gammaMax max_k |gamma_k|.
 * @returns the factor (>= the local factor at the centre, equal to it at rho = 0).
 * @example layerNormBallFactor(1, 0, 4, 0, 1) // 1
 */
export function layerNormBallFactor(
  std0: number,
  rho: number,
  d: number,
  eps: number,
  gammaMax: number,
): number {
  const s = Math.max(std0 - rho / Math.sqrt(d), 0);
  return gammaMax / Math.sqrt(s * s + eps);
}

/**
 * The largest value of 2 p (1 - p) for p in [lo, hi] (Gershgorin's bound on a softmax row's
 * Jacobian, section 7): 1/2 when the interval holds 1/2, else the end nearer 1/2.
 *
 * @example gershgorinMax(0.7, 0.9) // 0.42
 */
export function gershgorinMax(lo: number, hi: number): number {
  const p = hi < 0.5 ? hi : lo > 0.5 ? lo : 0.5;
  return 2 * p * (1 - p);
}

/**
 * An upper bound of sigma(p) = ||diag(p) - p p^T||_2 over every probability vector p in the box
 * lo <= p <= hi (entries of one attention row; docs/math.md section 7): the smallest of
 * (1) max_k hi_k (interlacing, sigma <= p_(1)), (2) max_k max_{[lo_k, hi_k]} 2 p (1 - p)
 * (Gershgorin), (3) the largest a (1 - a + B) over a in [max_k lo_k, max_k hi_k] with B the
 * second largest hi_k (sigma_top2 = p_(1)(1 - p_(1) + p_(2)), increasing in p_(2) and concave in
 * p_(1)), and (4) 1/2.
 *
 * @param lo, hi the box [m] over the row's allowed keys (0 <= lo <= hi <= 1).
 * @param m how many entries to read (lo and hi may be longer).
 * @returns the bound in [0, 1/2]; 0 for m = 0 or one key (the row is then constant).
 * @example sigmaBoxMax([0.9, 0.05, 0.05], [0.9, 0.05, 0.05], 3) // 0.135 (sigma_top2 at the point)
 */
export function sigmaBoxMax(lo: ArrayLike<number>, hi: ArrayLike<number>, m: number): number {
  if (m <= 1) return 0;
  let aLo = 0;
  let aHi = 0;
  let bHi = 0;
  let gersh = 0;
  for (let k = 0; k < m; k++) {
    const h = hi[k];
    if (lo[k] > aLo) aLo = lo[k];
    if (h > aHi) {
      bHi = aHi;
      aHi = h;
    } else if (h > bHi) bHi = h;
    const g = gershgorinMax(lo[k], h);
    if (g > gersh) gersh = g;
  }
  const a = Math.min(Math.max((1 + bHi) / 2, aLo), aHi);
  const top2 = a * (1 - a + bHi);
  return Math.max(0, Math.min(aHi, gersh, top2, 0.5));
}

/**
 * How far one attention score s_ij = q_i . k_j / sqrt(d_k) can move when the layer input moves
 * within the Frobenius ball of radius r (docs/math.md section 7, "Scores"): with
 * q_i = x_i W_Q + b_Q, k_j = x_j W_K + b_K and moves d_i, d_j of the two tokens,
 * q_i . k_j changes by d_i . a_j + d_j . b_i + d_i W_Q W_K^T d_j^T, a_j = W_Q k_j^T, b_i = W_K q_i^T;
 * for i != j, ||d_i||^2 + ||d_j||^2 <= r^2 gives at most sqrt(||a_j||^2 + ||b_i||^2) r + ||M|| r^2 / 2,
 * and for i = j (d_i = d_j) at most (||a_i|| + ||b_i||) r + ||M|| r^2, M = W_Q W_K^T.
 *
 * @param a ||W_Q k_j^T|| at the centre; @param b ||W_K q_i^T||; @param m ||W_Q W_K^T||_2.
 * @param same whether i = j. @param dk the head width.
 * @returns the half-width of s_ij's interval around its centre value.
 * @example scoreHalfWidth(1, 1, 0, 0.5, false, 1) // 0.7071...
 */
export function scoreHalfWidth(
  a: number,
  b: number,
  m: number,
  r: number,
  same: boolean,
  dk: number,
): number {
  const w = same ? (a + b) * r + m * r * r : Math.hypot(a, b) * r + (m * r * r) / 2;
  return w / Math.sqrt(dk);
}

/**
 * log sum_{l != j} e^{s_l} for every j of s [m] (m >= 2), into out [m]: the terms shifted by the
 * largest score (by the second largest for the largest's own sum), so each sum holds a term 1
 * and neither underflows to 0 nor overflows; the sums over the others come from prefix and
 * suffix sums, so nothing cancels.
 *
 * @param work scratch of at least m + 1 entries.
 */
function logSumOthers(
  s: ArrayLike<number>,
  m: number,
  out: Float64Array,
  work: Float64Array,
): void {
  let top = 0;
  for (let k = 1; k < m; k++) if (s[k] > s[top]) top = k;
  const max = s[top];
  let second = -Infinity;
  for (let k = 0; k < m; k++) if (k !== top && s[k] > second) second = s[k];
  work[0] = 0;
  for (let k = 0; k < m; k++) work[k + 1] = work[k] + Math.exp(s[k] - max);
  let suffix = 0;
  for (let k = m - 1; k >= 0; k--) {
    out[k] = Math.log(work[k] + suffix) + max;
    suffix += Math.exp(s[k] - max);
  }
  let own = 0;
  for (let k = 0; k < m; k++) if (k !== top) own += Math.exp(s[k] - second);
  out[top] = Math.log(own) + second;
}

/**
 * The probability box of one softmax row whose scores lie in [lo_j, hi_j] (docs/math.md
 * section 7): p_j <= e^{hi_j} / (e^{hi_j} + sum_{l != j} e^{lo_l}) and p_j >= e^{lo_j} /
 * (e^{lo_j} + sum_{l != j} e^{hi_l}) (the softmax entry j increases with s_j and decreases with
 * every other score), each computed as 1 / (1 + e^t) with t = log sum_{l != j} e^{s_l} - s_j.
 *
 * @param sLo, sHi score intervals [m] of the row's allowed keys (sLo <= sHi).
 * @param pLo, pHi receive the box [m].
 * @param work scratch of at least 2 m + 1 entries.
 * @example probabilityBox([0, 0], [0, 0], lo, hi, 2, work) // lo = hi = [0.5, 0.5]
 */
export function probabilityBox(
  sLo: ArrayLike<number>,
  sHi: ArrayLike<number>,
  pLo: Float64Array,
  pHi: Float64Array,
  m: number,
  work: Float64Array,
): void {
  if (m === 0) return;
  if (m === 1) {
    pLo[0] = 1;
    pHi[0] = 1;
    return;
  }
  const sums = work.subarray(m + 1, 2 * m + 1);
  // Upper ends: the others at their lower scores.
  logSumOthers(sLo, m, sums, work);
  for (let j = 0; j < m; j++) pHi[j] = 1 / (1 + Math.exp(sums[j] - sHi[j]));
  // Lower ends: the others at their upper scores.
  logSumOthers(sHi, m, sums, work);
  for (let j = 0; j < m; j++) pLo[j] = 1 / (1 + Math.exp(sums[j] - sLo[j]));
}

/** sqrt(2 / pi) = max |geluErf''| (at 0; geluErf'' = phi (2 - z^2), and |phi (z^2 - 2)| <= 0.11 elsewhere). */
export const GELU_ERF_SECOND_DERIVATIVE_MAX = Math.sqrt(2 / Math.PI);

/**
 * A bound of |act'(z)| for every z within `spread` of a pre-activation whose |act'| is at most
 * `atCentre` (docs/math.md section 7, "MLP"): exact GELU's derivative is
 * sqrt(2/pi)-Lipschitz (|act''| = phi |2 - z^2| <= 2 phi(0)), so
 * min(max|act'|, atCentre + sqrt(2/pi) spread); the tanh form's derivative is bounded by its
 * maximum over the reals (1.1289), whatever the spread.
 *
 * @param activation "gelu-erf" or "gelu-tanh".
 * @param atCentre max |act'(h)| over the centre's pre-activations h.
 * @param spread how far a pre-activation may move (r max_j ||W_1[:, j]||).
 * @example activationDerivativeBound("gelu-erf", 1, 0.01) // 1.00798
 */
export function activationDerivativeBound(
  activation: string,
  atCentre: number,
  spread: number,
): number {
  if (activation !== "gelu-erf") return GELU_DERIVATIVE_MAX;
  return Math.min(GELU_ERF_DERIVATIVE_MAX, atCentre + GELU_ERF_SECOND_DERIVATIVE_MAX * spread);
}

/**
 * The largest tanh'(z) = 1 - tanh(z)^2 over z in [lo, hi]: 1 when the interval holds 0, else at
 * the end nearer 0 (tanh' is even and decreasing in |z|).
 *
 * @example tanhDerivativeBound(1, 2) // 1 - tanh(1)^2
 */
export function tanhDerivativeBound(lo: number, hi: number): number {
  if (lo <= 0 && hi >= 0) return 1;
  const z = Math.min(Math.abs(lo), Math.abs(hi));
  const t = Math.tanh(z);
  return 1 - t * t;
}
