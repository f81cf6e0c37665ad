import { belowCertified, symMaxEigenvalue } from "../linalg.ts";
import type { HeadInput } from "./headTypes.ts";
import { weightedRowSums } from "./rowContractions.ts";

/**
 * max over live rows of ||W_Q K^T J_i V||_2 (not yet divided by sqrt(d_k)), the exact query path
 * of `cov` and `fused` (docs/math.md section 2). Per live row, C_i = K^T J_i V (J_i = diag(w) -
 * w w^T, w = P_i) and ||W_Q C_i||_2^2 = lambda_max(C_i^T G_Q C_i). With K, V centred by the
 * active-key means (mu_K, mu_V; kc_j = k_j - mu_K) and kb = sum_j w_j kc_j, vb = sum_j w_j vc_j,
 * m = sum_j w_j:
 *   C_i = sum_j w_j kc_j vc_j^T - kb vb^T + (1 - m) (kb mu_V^T + mu_K vb^T + m mu_K mu_V^T),
 * exact for any m (float32 rows sum to 1 +- 1e-7), and free of the cancellation that uncentred
 * keys with a large common offset would cause. z_j = vec(kc_j vc_j^T) is shared by all rows, so
 * each row costs one pass of n * d_k^2 multiply-adds. A function of its own so that V8
 * optimizes its loops on their own.
 * `gramOf(i)` is the Gram matrix of the query weights seen by row i: W_Q^T W_Q, or
 * (L_i W_Q)^T (L_i W_Q) after a row-wise map (`fused`); `rowWeight` scales row i's output by
 * w_i (`fused`'s output-row weights); `perRow`, when given, receives every row's
 * lambda_max(C_i^T G_i C_i) (then no row is skipped).
 *
 * @example queryPathExact(head, () => norms.gq) / Math.sqrt(dk) // cov's query path
 */
export function queryPathExact(
  head: HeadInput,
  gramOf: (row: number) => Float64Array,
  rowWeight?: ArrayLike<number>,
  perRow?: Float64Array,
): number {
  const { n, dk, pm, rows, kMean, vMean } = head;
  const dk2 = dk * dk;
  const { kcAll, vcAll, z } = centredOuters(head);
  let queryExact = 0;
  const ci = new Float64Array(dk2);
  const kb = new Float64Array(dk);
  const vb = new Float64Array(dk);
  const gc = new Float64Array(dk2);
  const ct = new Float64Array(dk2);
  // Rows in decreasing order of exact sigma; a row whose C_i^T G_Q C_i is certified below the
  // running max (positive-definite Cholesky of c I - that matrix, c slightly reduced to cover
  // the certificate's rounding) cannot raise the max and skips the eigenvalue computation.
  const order: number[] = [];
  const weightOf = (i: number) => (rowWeight === undefined ? 1 : rowWeight[i]);
  for (let i = 0; i < n; i++)
    if (rows.live[i] && rows.exact[i] !== 0 && weightOf(i) !== 0) order.push(i);
  order.sort((x, y) => rows.exact[y] * weightOf(y) - rows.exact[x] * weightOf(x));
  const work = new Float64Array(dk2);
  // sum_j w_j z_j of every visited row at once (the rows of P Z): four rows share each pass
  // over z, which is n d_k^2 entries (4 MB at 128 tokens, d_k 64: beyond the cache), so z is
  // read n / 4 times instead of n. Each entry is still summed over j in increasing order,
  // skipping w_j = 0, as the row-by-row loop did: the same values, bit for bit.
  const cAll = weightedRowSums(order, n, dk2, pm, z);
  let best = 0;
  let any = false;
  for (let r = 0; r < order.length; r++) {
    const i = order[r];
    kb.fill(0);
    vb.fill(0);
    ci.set(cAll.subarray(r * dk2, (r + 1) * dk2));
    let mass = 0;
    for (let j = 0; j < n; j++) {
      const w = pm[i * n + j];
      if (w === 0) continue;
      mass += w;
      for (let c = 0; c < dk; c++) {
        kb[c] += w * kcAll[j * dk + c];
        vb[c] += w * vcAll[j * dk + c];
      }
    }
    const rest = 1 - mass;
    for (let a = 0; a < dk; a++)
      for (let b = 0; b < dk; b++)
        ci[a * dk + b] +=
          -kb[a] * vb[b] +
          rest * (kb[a] * vMean[b] + kMean[a] * vb[b] + mass * kMean[a] * vMean[b]);
    // ct = C_i^T G_Q C_i.
    const gq = gramOf(i);
    gc.fill(0);
    for (let a = 0; a < dk; a++)
      for (let t = 0; t < dk; t++) {
        const g = gq[a * dk + t];
        if (g === 0) continue;
        for (let b = 0; b < dk; b++) gc[a * dk + b] += g * ci[t * dk + b];
      }
    // Row i's output scaled by its weight w_i: the Gram matrix by w_i^2.
    const w2 = weightOf(i) * weightOf(i);
    for (let a = 0; a < dk; a++)
      for (let b = a; b < dk; b++) {
        let s = 0;
        for (let t = 0; t < dk; t++) s += ci[t * dk + a] * gc[t * dk + b];
        ct[a * dk + b] = s * w2;
        ct[b * dk + a] = s * w2;
      }
    // (Every row's value is computed when they are kept: perRow.)
    if (
      perRow === undefined &&
      any &&
      belowCertified(ct, dk, best * (1 - 4 * dk * (dk + 1) * Number.EPSILON), work)
    )
      continue;
    const lambda = symMaxEigenvalue(ct, dk);
    if (perRow !== undefined) perRow[i] = Math.max(lambda, 0);
    best = Math.max(best, lambda);
    any = true;
  }
  queryExact = Math.sqrt(Math.max(best, 0));
  return queryExact;
}

/**
 * K and V centred by the active-key means [n, d_k], and z_j = vec(kc_j vc_j^T) [n, d_k^2] for
 * the active keys (0 elsewhere), which every row's C_i sums with its weights.
 */
function centredOuters(head: HeadInput): {
  kcAll: Float64Array;
  vcAll: Float64Array;
  z: Float64Array;
} {
  const { n, dk, k, v, kMean, vMean, activeKey } = head;
  const dk2 = dk * dk;
  const kcAll = new Float64Array(n * dk);
  const vcAll = new Float64Array(n * dk);
  for (let j = 0; j < n; j++)
    for (let c = 0; c < dk; c++) {
      kcAll[j * dk + c] = k[j * dk + c] - kMean[c];
      vcAll[j * dk + c] = v[j * dk + c] - vMean[c];
    }
  const z = new Float64Array(n * dk2);
  for (let j = 0; j < n; j++) {
    if (!activeKey[j]) continue;
    for (let a = 0; a < dk; a++) {
      const ka = kcAll[j * dk + a];
      for (let b = 0; b < dk; b++) z[j * dk2 + a * dk + b] = ka * vcAll[j * dk + b];
    }
  }
  return { kcAll, vcAll, z };
}
