import { rowStats, type RowStats } from "./rowStats.ts";

/**
 * The seed paper's closed-form upper bound on sigma(p) = ||diag(p) - p p^T||_2 (docs/math.md
 * section 1, "top-two"; arXiv:2507.07814 as transcribed): p_(1) (1 - p_(1) + p_(2)),
 * with 1 - p_(1) taken as the sum of the other entries so that near one-hot rows keep
 * their digits.
 *
 * @param p a probability row, any length >= 0; entries are assumed >= 0 (not checked here:
 *   validate user input with `parseProbabilityRow`).
 * @returns a value in [0, 1/2] (for rows on the simplex), >= sigma(p); 0 for empty rows.
 */
export function sigmaTop2(p: ArrayLike<number>): number {
  return sigmaTop2FromStats(rowStats(p));
}

/** sigmaTop2 from precomputed row statistics (see {@link rowStats}). */
export function sigmaTop2FromStats(st: RowStats): number {
  if (st.topIndex < 0) return 0;
  if (st.b >= st.a) return st.a; // tie at the top: a (r + a) = a exactly; skip the rounding of r
  return st.a * (st.r + st.b);
}

/**
 * The quadratic closed-form upper bound on sigma(p) (docs/math.md section 1, "quadratic"):
 * with a = p_(1), b = p_(2), r = sum of the others, S = sum of their squares,
 * B = a r + b - S, C = a (b r - S), sigmaQuad = (B + sqrt(max(B^2 - 4C, 0))) / 2.
 * It is the larger root of the quadratic that bounds the secular equation from below,
 * so sigma <= sigmaQuad <= sigmaTop2, with equality when every entry but p_(1) is p_(2) or 0.
 *
 * @param p a probability row (entries >= 0, summing to 1 up to rounding).
 * @returns a value in [0, 1/2]; 0 for empty, all-zero or one-hot rows.
 */
export function sigmaQuad(p: ArrayLike<number>): number {
  return sigmaQuadFromStats(rowStats(p));
}

/** sigmaQuad from precomputed row statistics (see {@link rowStats}). */
export function sigmaQuadFromStats(st: RowStats): number {
  if (st.topIndex < 0 || st.b <= 0) return 0;
  if (st.b >= st.a) return st.a; // tie at the top: exact, and immune to rounding below
  // Solved in the variable mu = lambda / b, so that rows with entries near 1e-160 and below
  // do not underflow: B = b (a r' + 1 - b S'), C = b^2 a (r' - S') with r' = r / b, S' = S / b^2.
  const { a, b } = st;
  const rs = st.r / b;
  const bigB = a * rs + 1 - b * st.sScaled;
  const bigC = a * (rs - st.sScaled);
  const mu = (bigB + Math.sqrt(Math.max(bigB * bigB - 4 * bigC, 0))) / 2;
  return Math.min(b * mu, sigmaTop2FromStats(st));
}
