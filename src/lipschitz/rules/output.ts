import { layerNormBound } from "./layerNorm.ts";
import { spectralNorm } from "../linalg.ts";

/**
 * The final LayerNorm with pooling, and the linear head (docs/math.md section 3).
 */

/**
 * Final LayerNorm followed by pooling, as one factor.
 * - "cls": pooled = LN(x)_0, only row 0 moves the output: the row-0 LayerNorm factor.
 * - "mean": pooled = (1/m) sum over the m real rows of LN(x)_i; with J_i the row Jacobians,
 *   ||(1/m) sum J_i E_i|| <= max_i ||J_i|| (1/m) sum ||E_i|| <= max_i ||J_i|| ||E||_F / sqrt(m):
 *   the max real-row factor divided by sqrt(m).
 *
 * @param x final LayerNorm input [n, d]; @param gamma [d]; @param eps LayerNorm epsilon.
 * @param pooling "cls" or "mean".
 * @param real optional [n] mask of real rows (nonzero = real) for mean pooling (default all).
 * @returns the factor (0 when no row is real: the pooled output is then constant).
 * @throws RangeError on size mismatches or an unknown pooling.
 */
export function finalNormBound(
  x: ArrayLike<number>,
  n: number,
  d: number,
  gamma: ArrayLike<number>,
  eps: number,
  pooling: "cls" | "mean",
  real?: ArrayLike<number | boolean>,
): number {
  if (pooling === "cls") return layerNormBound(x, n, d, gamma, eps, [0]).value;
  if (pooling !== "mean") throw new RangeError(`final norm: unknown pooling "${String(pooling)}"`);
  const rows: number[] = [];
  for (let i = 0; i < n; i++) if (real === undefined || real[i]) rows.push(i);
  if (rows.length === 0) return 0;
  return layerNormBound(x, n, d, gamma, eps, rows).value / Math.sqrt(rows.length);
}

/**
 * Linear head logits = pooled W + b: exactly ||W||_2.
 *
 * @param w head.w [d, classes] row-major. @returns ||W||_2.
 * @throws RangeError on a size mismatch or non-finite entries.
 */
export function headBound(w: ArrayLike<number>, d: number, classes: number): number {
  if (w.length !== d * classes) throw new RangeError(`head: W must be [${d}, ${classes}]`);
  return spectralNorm(w, d, classes);
}
