/**
 * Local Lipschitz rule of LayerNorm applied row-wise (docs/math.md section 3). Per row the Jacobian
 * is diag(gamma) (I - 11^T/d - y0 y0^T/d) / sqrt(var + eps) with y0 the normalized row; the
 * middle factor is a symmetric matrix with eigenvalues in [0, 1] (y0 is orthogonal to 1 and
 * ||y0||^2 = d var / (var + eps) <= d), so the row's factor is at most
 * max|gamma| / sqrt(var_row + eps). Rows do not mix, so the layer's bound is the max over rows.
 */

/** Result of {@link layerNormBound}. */
export interface LayerNormBound {
  /** max over the rows considered of the per-row factor. */
  value: number;
  /** Per-row factor max|gamma| / sqrt(var_row + eps), length n (all rows). */
  rows: Float64Array;
}

/**
 * @param x the LayerNorm input [n, d] row-major (float32 or float64; computed in float64).
 * @param n rows; @param d width.
 * @param gamma scale [d]. @param eps the LayerNorm epsilon (> 0).
 * @param rows optional subset of rows whose max is taken (default: all); e.g. [0] for a CLS
 *   pooled output.
 * @returns {value, rows}: value is 0 only when the row subset is empty.
 * @throws RangeError on size mismatches, eps <= 0, or a row index out of range.
 */
export function layerNormBound(
  x: ArrayLike<number>,
  n: number,
  d: number,
  gamma: ArrayLike<number>,
  eps: number,
  rows?: readonly number[],
): LayerNormBound {
  if (x.length < n * d)
    throw new RangeError(`layerNorm: x must have n*d = ${n * d} entries, got ${x.length}`);
  if (gamma.length !== d)
    throw new RangeError(`layerNorm: gamma must have d = ${d} entries, got ${gamma.length}`);
  if (!(eps > 0)) throw new RangeError(`layerNorm: eps must be > 0, got ${eps}`);
  let gMax = 0;
  for (let i = 0; i < d; i++) gMax = Math.max(gMax, Math.abs(gamma[i]));
  const per = new Float64Array(n);
  for (let r = 0; r < n; r++) {
    let mean = 0;
    for (let i = 0; i < d; i++) mean += x[r * d + i];
    mean /= d;
    let v = 0;
    for (let i = 0; i < d; i++) v += (x[r * d + i] - mean) ** 2;
    v /= d;
    per[r] = gMax / Math.sqrt(v + eps);
  }
  let value = 0;
  for (const r of rows ?? per.keys()) {
    if (!Number.isInteger(r) || r < 0 || r >= n)
      throw new RangeError(`layerNorm: row ${r} out of range [0, ${n})`);
    value = Math.max(value, per[r]);
  }
  return { value, rows: per };
}
