import { rowStats } from "./rowStats.ts";
import { solveSecular } from "./sigma.ts";
import { sigmaQuadFromStats, sigmaTop2FromStats } from "./closedForm.ts";

/** The per-row quantities offered over whole attention maps. */
export type RowNorm = "exact" | "quad" | "top2";

/** Options of {@link sigmaRows}. */
export interface SigmaRowsOptions {
  /** Which value to compute per row: exact sigma (default), sigmaQuad or sigmaTop2. */
  norm?: RowNorm;
  /**
   * Valid positions, same length and layout as the data (1/true = valid). Masked
   * positions count as zeros; a fully masked row gives 0.
   */
  mask?: ArrayLike<number | boolean>;
  /** Write results here instead of allocating (length = number of rows). */
  out?: Float64Array;
}

/**
 * sigma (or a closed form) for every row of a row-major attention map, e.g. attention
 * probabilities of shape [batch, heads, n, n] flattened, with row length n.
 *
 * @param data row-major values, length a multiple of `n` (float32 or float64; computed in float64).
 * @param n row length (number of keys), an integer >= 1.
 * @returns one value per row, length data.length / n.
 * @throws RangeError if n is not a positive integer, data.length is not a multiple of n,
 *   or mask/out have the wrong length.
 */
export function sigmaRows(
  data: ArrayLike<number>,
  n: number,
  options: SigmaRowsOptions = {},
): Float64Array {
  if (!Number.isInteger(n) || n < 1) throw new RangeError(`n: expected a positive integer row length, got ${n}`);
  if (data.length % n !== 0)
    throw new RangeError(`data: length ${data.length} is not a multiple of the row length n = ${n}`);
  const rows = data.length / n;
  const { mask, norm = "exact" } = options;
  if (mask !== undefined && mask.length !== data.length)
    throw new RangeError(`mask: expected length ${data.length} (same as data), got ${mask.length}`);
  const out = options.out ?? new Float64Array(rows);
  if (out.length !== rows) throw new RangeError(`out: expected length ${rows}, got ${out.length}`);
  for (let row = 0; row < rows; row++) {
    const offset = row * n;
    const st = rowStats(data, offset, n, mask, offset);
    out[row] =
      norm === "exact"
        ? solveSecular(st, data, offset, mask, offset)
        : norm === "quad"
          ? sigmaQuadFromStats(st)
          : sigmaTop2FromStats(st);
  }
  return out;
}
