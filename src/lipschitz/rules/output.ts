import { layerNormBound } from "./layerNorm.ts";
import { spectralNorm } from "../linalg.ts";
import type { Pooling } from "../../nn/pooling.ts";

/**
 * The final LayerNorm with pooling, and the linear head (docs/math.md section 3).
 */

/**
 * The rows that pooling reads: "cls" row 0, "last" the last real row, "mean" every real row
 * (`real` absent: all rows real). Empty when no row is real (then the pooled output is
 * constant). Formula source: docs/math.md section 3, "Pooling".
 *
 * @param n rows. @param real optional [n] mask, nonzero = real.
 * @throws RangeError on an unknown pooling.
 * @example pooledRows(4, "last", [1, 1, 0, 0]) // [1]
 */
export function pooledRows(
  n: number,
  pooling: Pooling,
  real?: ArrayLike<number | boolean>,
): number[] {
  const rows: number[] = [];
  for (let i = 0; i < n; i++) if (real === undefined || real[i]) rows.push(i);
  if (pooling === "cls") return n > 0 ? [0] : [];
  if (pooling === "last") return rows.length > 0 ? [rows[rows.length - 1]] : [];
  if (pooling !== "mean") throw new RangeError(`pooling: unknown pooling "${String(pooling)}"`);
  return rows;
}

/**
 * Pooling alone (no final LayerNorm: BERT), [n, d] -> [d], exactly: "cls" and "last" select a
 * row (Jacobian [0 .. I .. 0], norm 1); "mean" over m real rows is (1/m)[I .. I], norm
 * 1/sqrt(m); 0 when no row is real.
 *
 * @example poolBound(5, "mean", [1, 1, 1, 1, 0]) // 0.5
 */
export function poolBound(n: number, pooling: Pooling, real?: ArrayLike<number | boolean>): number {
  const rows = pooledRows(n, pooling, real);
  if (rows.length === 0) return 0;
  return pooling === "mean" ? 1 / Math.sqrt(rows.length) : 1;
}

/**
 * Final LayerNorm followed by pooling, as one factor.
 * - "cls" / "last": pooled = LN(x)_r for one row r (row 0, or the last real row): only row r
 *   moves the output, so the factor is row r's LayerNorm factor.
 * - "mean": pooled = (1/m) sum over the m real rows of LN(x)_i; with J_i the row Jacobians,
 *   ||(1/m) sum J_i E_i|| <= max_i ||J_i|| (1/m) sum ||E_i|| <= max_i ||J_i|| ||E||_F / sqrt(m):
 *   the max real-row factor divided by sqrt(m).
 *
 * @param x final LayerNorm input [n, d]; @param gamma [d]; @param eps LayerNorm epsilon.
 * @param pooling "cls", "mean" or "last".
 * @param real optional [n] mask of real rows (nonzero = real) for mean and last pooling (default all).
 * @returns the factor (0 when no row is real: the pooled output is then constant).
 * @throws RangeError on size mismatches or an unknown pooling.
 * @example finalNormBound([0, 2, 5, 5], 2, 2, [1, 1], 0, "cls") // 1 (row 0 has standard deviation 1)
 */
export function finalNormBound(
  x: ArrayLike<number>,
  n: number,
  d: number,
  gamma: ArrayLike<number>,
  eps: number,
  pooling: Pooling,
  real?: ArrayLike<number | boolean>,
): number {
  const rows = pooledRows(n, pooling, real);
  if (rows.length === 0) return 0;
  const factor = layerNormBound(x, n, d, gamma, eps, rows).value;
  return pooling === "mean" ? factor / Math.sqrt(rows.length) : factor;
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
