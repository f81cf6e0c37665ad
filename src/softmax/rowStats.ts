/**
 * One pass over an attention row: the quantities every sigma formula needs.
 *
 * Why not sort: sigma, sigmaTop2 and sigmaQuad need only the largest entry, the second
 * largest and two sums over the others, so one O(n) scan replaces an O(n log n) sort.
 */
export interface RowStats {
  /** Number of positions in the row (masked ones included). */
  n: number;
  /** Index of the largest entry p_(1) within the row (first one on ties); -1 if none is positive. */
  topIndex: number;
  /** p_(1): the largest entry (0 for an all-zero or fully masked row). */
  a: number;
  /** p_(2): the largest entry at any other index (equals `a` on a tie at the top). */
  b: number;
  /** r = sum of all entries but p_(1); the stable form of 1 - p_(1) (docs/math.md section 1). */
  r: number;
  /** S = sum of squares of all entries but p_(1) (may underflow for tiny entries; see sScaled). */
  s: number;
  /**
   * S / p_(2)^2 = sum of (p_i / p_(2))^2 over the entries but p_(1), accumulated with a running
   * rescale (as LAPACK's dnrm2 does) so that entries near 1e-160 and below do not underflow.
   * 0 when p_(2) = 0.
   */
  sScaled: number;
}

/**
 * Reads entries data[offset .. offset + n) of a row-major buffer, treating masked
 * positions (mask[maskOffset + i] === 0) as exact zeros.
 */
export function rowStats(
  data: ArrayLike<number>,
  offset = 0,
  n: number = data.length - offset,
  mask?: ArrayLike<number | boolean>,
  maskOffset: number = offset,
): RowStats {
  let a = 0;
  let topIndex = -1;
  for (let i = 0; i < n; i++) {
    const v = mask !== undefined && !mask[maskOffset + i] ? 0 : data[offset + i];
    if (v > a) {
      a = v;
      topIndex = i;
    }
  }
  let b = 0;
  let r = 0;
  let sScaled = 0;
  for (let i = 0; i < n; i++) {
    if (i === topIndex) continue;
    const v = mask !== undefined && !mask[maskOffset + i] ? 0 : data[offset + i];
    if (v > 0) {
      r += v;
      if (v > b) {
        const ratio = b / v;
        sScaled = sScaled * ratio * ratio + 1;
        b = v;
      } else {
        const ratio = v / b;
        sScaled += ratio * ratio;
      }
    }
  }
  return { n, topIndex, a, b, r, s: sScaled * b * b, sScaled };
}
