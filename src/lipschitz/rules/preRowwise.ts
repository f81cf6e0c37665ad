import { gramCols, symMaxEigenvalue } from "../linalg.ts";
import type { PreRowwise } from "./attentionHead.ts";
import { rowTimes, type RowJacobian } from "./rowwise.ts";

/**
 * What `fused` needs of a row-wise map before multi-head attention (docs/math.md section 2,
 * `fused`): per head h and row j, with L_j the map's row Jacobian (row-vector convention) and
 * W_h the head's columns of W [d, d], the Gram matrices (L_j W_Q,h)^T (L_j W_Q,h) and
 * (L_j W_K,h)^T (L_j W_K,h) and the norms ||L_j W_K,h||_2, ||L_j W_V,h||_2. Each row costs three
 * products L_j W (O(d^2) each for a LayerNorm row) and 3 H Gram matrices of d x d_k.
 *
 * @param rowJacobian L_j for rows j = 0..n-1 ([d, d], e.g. layerNormRowJacobian).
 * @param w W_Q, W_K, W_V [d, d] row-major, all heads' columns (head h: columns h d_k .. (h+1) d_k - 1).
 * @param factor a bound on max_j ||L_j||_2 (the map's own bound).
 * @returns one {@link PreRowwise} per head.
 * @throws RangeError when d is not divisible by heads or a matrix is not d x d.
 * @example preRowwise((j) => layerNormRowJacobian(xs[j], gamma, 1e-5), n, { wq, wk, wv }, 4, lnBound)
 */
export function preRowwise(
  rowJacobian: (row: number) => RowJacobian,
  n: number,
  w: {
    wq: Float32Array | Float64Array;
    wk: Float32Array | Float64Array;
    wv: Float32Array | Float64Array;
  },
  heads: number,
  factor: number,
): PreRowwise[] {
  const d = Math.round(Math.sqrt(w.wq.length));
  if (d * d !== w.wq.length || w.wk.length !== d * d || w.wv.length !== d * d || d % heads !== 0)
    throw new RangeError(
      `preRowwise: expected W_Q, W_K, W_V [d, d] with d divisible by ${heads} heads`,
    );
  const dk = d / heads;
  const pres: PreRowwise[] = Array.from({ length: heads }, () => ({
    gramQ: new Float64Array(n * dk * dk),
    gramK: new Float64Array(n * dk * dk),
    kappa: new Float64Array(n),
    nu: new Float64Array(n),
    factor,
  }));
  const block = new Float64Array(d * dk);
  // Columns [h d_k, (h + 1) d_k) of m [d, d] into block [d, d_k].
  const columns = (m: Float64Array, h: number) => {
    for (let a = 0; a < d; a++)
      for (let c = 0; c < dk; c++) block[a * dk + c] = m[a * d + h * dk + c];
    return block;
  };
  const norm = (g: Float64Array) => Math.sqrt(Math.max(symMaxEigenvalue(g, dk), 0));
  for (let j = 0; j < n; j++) {
    const L = rowJacobian(j);
    const lq = rowTimes(L, w.wq);
    const lk = rowTimes(L, w.wk);
    const lv = rowTimes(L, w.wv);
    for (let h = 0; h < heads; h++) {
      pres[h].gramQ.set(gramCols(columns(lq, h), d, dk), j * dk * dk);
      const gk = gramCols(columns(lk, h), d, dk);
      pres[h].gramK.set(gk, j * dk * dk);
      pres[h].kappa[j] = norm(gk);
      pres[h].nu[j] = norm(gramCols(columns(lv, h), d, dk));
    }
  }
  return pres;
}
