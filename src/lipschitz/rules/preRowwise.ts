import { gramCols, symMaxEigenvalue } from "../linalg.ts";
import type { PreRowwise } from "./attentionHead.ts";
import { rowTimes, type RowJacobian } from "./rowwise.ts";

/**
 * What `fused` needs of a row-wise map before multi-head attention (docs/math.md section 2,
 * `fused`): per head h and row j, with L_j the map's row Jacobian (row-vector convention) and
 * W_h the head's columns of W [d, d], the Gram matrices (L_j W_Q,h)^T (L_j W_Q,h) and
 * (L_j W_K,h)^T (L_j W_K,h) and the norms ||L_j W_K,h||_2, ||L_j W_V,h||_2. Each row costs three
 * products L_j W (O(d^2) each for a LayerNorm row) and 3 H Gram matrices of d x d_k; a
 * LayerNorm row (RowJacobian.layerNorm) costs three products W^T (gamma o z) instead, O(d^2) in
 * all, and O(d_k^2) per head from weight-only Gram matrices ({@link layerNormGram}).
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
  // Weight-only parts for LayerNorm rows, per gamma (one LayerNorm: one gamma for every row).
  let lnParts: {
    gamma: ArrayLike<number>;
    q: LnWeightParts;
    k: LnWeightParts;
    v: LnWeightParts;
  } | null = null;
  for (let j = 0; j < n; j++) {
    const L = rowJacobian(j);
    const ln = L.layerNorm;
    if (ln !== undefined) {
      if (lnParts === null || lnParts.gamma !== ln.gamma) {
        const parts = (m: Float32Array | Float64Array) => lnWeightParts(m, ln.gamma, d, heads);
        lnParts = { gamma: ln.gamma, q: parts(w.wq), k: parts(w.wk), v: parts(w.wv) };
      }
      const { q, k, v } = lnParts;
      const bq = lnRowParts(w.wq, ln.gamma, ln.z, d);
      const bk = lnRowParts(w.wk, ln.gamma, ln.z, d);
      const bv = lnRowParts(w.wv, ln.gamma, ln.z, d);
      const row = lnRowScalars(ln);
      for (let h = 0; h < heads; h++) {
        pres[h].gramQ.set(layerNormGram(q, h, bq, row, dk), j * dk * dk);
        const gk = layerNormGram(k, h, bk, row, dk);
        pres[h].gramK.set(gk, j * dk * dk);
        pres[h].kappa[j] = norm(gk);
        pres[h].nu[j] = norm(layerNormGram(v, h, bv, row, dk));
      }
      continue;
    }
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

/** Weight-only parts of (J W_h)^T (J W_h) for LayerNorm rows J: per head, G0 = W_h^T diag(gamma)^2 W_h and a = W_h^T gamma. */
interface LnWeightParts {
  g0: Float64Array[];
  a: Float64Array[];
  trace: number[];
}

function lnWeightParts(
  m: Float32Array | Float64Array,
  gamma: ArrayLike<number>,
  d: number,
  heads: number,
): LnWeightParts {
  const dk = d / heads;
  const block = new Float64Array(d * dk);
  const out: LnWeightParts = { g0: [], a: [], trace: [] };
  for (let h = 0; h < heads; h++) {
    for (let r = 0; r < d; r++)
      for (let c = 0; c < dk; c++) block[r * dk + c] = gamma[r] * m[r * d + h * dk + c];
    const g0 = gramCols(block, d, dk);
    const a = new Float64Array(dk);
    for (let r = 0; r < d; r++) for (let c = 0; c < dk; c++) a[c] += block[r * dk + c];
    let trace = 0;
    for (let c = 0; c < dk; c++) trace += g0[c * dk + c];
    out.g0.push(g0);
    out.a.push(a);
    out.trace.push(trace);
  }
  return out;
}

/** A LayerNorm row's scalars in {@link layerNormGram}: d, s, c = 2 - ||z||^2/d, cross = 1^T z / d^2. */
interface LnRowScalars {
  d: number;
  s: number;
  c: number;
  cross: number;
}

/** {@link LnRowScalars} of a row, once per row (every head and weight matrix shares them). */
function lnRowScalars(ln: { z: Float64Array; s: number }): LnRowScalars {
  const d = ln.z.length;
  let zz = 0;
  let s1 = 0;
  for (let r = 0; r < d; r++) {
    zz += ln.z[r] * ln.z[r];
    s1 += ln.z[r];
  }
  return { d, s: ln.s, c: 2 - zz / d, cross: s1 / (d * d) };
}

/** b = W^T (gamma o z) for all heads' columns at once [d] (head h: entries h d_k .. (h+1) d_k - 1). */
function lnRowParts(
  m: Float32Array | Float64Array,
  gamma: ArrayLike<number>,
  z: Float64Array,
  d: number,
): Float64Array {
  const b = new Float64Array(d);
  for (let r = 0; r < d; r++) {
    const g = gamma[r] * z[r];
    if (g === 0) continue;
    const o = r * d;
    for (let c = 0; c < d; c++) b[c] += g * m[o + c];
  }
  return b;
}

/**
 * (J W_h)^T (J W_h) [d_k, d_k] for a LayerNorm row J = (1/s) P diag(gamma) (docs/math.md
 * section 3, "LayerNorm rows before attention"): P is symmetric with
 * P^2 = I - 1 1^T/d - (2 - ||z||^2/d) z z^T/d + (1^T z / d^2)(1 z^T + z 1^T), so with
 * G0 = W_h^T diag(gamma)^2 W_h, a = W_h^T gamma, b = W_h^T (gamma o z):
 *
 *   (J W_h)^T (J W_h) = (G0 - a a^T/d - (2 - ||z||^2/d) b b^T/d + (1^T z/d^2)(a b^T + b a^T)) / s^2,
 *
 * the same matrix as the explicit product's Gram matrix. delta I is added on top: the rounding of
 * this formula (each entry's error is at most (d + 8) eps times its sums of absolute terms, and by
 * Cauchy-Schwarz those sums' Frobenius norm is at most tr(G0) + ||a||^2/d + |c| ||b||^2/d +
 * 2 |1^T z| ||a|| ||b||/d^2), so the result is never below the exact Gram matrix in the PSD order.
 */
function layerNormGram(
  parts: LnWeightParts,
  h: number,
  bAll: Float64Array,
  row: LnRowScalars,
  dk: number,
): Float64Array {
  const { d, s, c, cross } = row;
  const g0 = parts.g0[h];
  const a = parts.a[h];
  const b = bAll.subarray(h * dk, (h + 1) * dk);
  const inv = 1 / (s * s);
  const g = new Float64Array(dk * dk);
  let aa = 0;
  let bb = 0;
  for (let x = 0; x < dk; x++) {
    aa += a[x] * a[x];
    bb += b[x] * b[x];
    // The upper triangle, mirrored: exactly symmetric (c b_x b_y rounds differently from c b_y b_x).
    for (let y = x; y < dk; y++) {
      const e =
        (g0[x * dk + y] -
          (a[x] * a[y]) / d -
          (c * b[x] * b[y]) / d +
          cross * (a[x] * b[y] + b[x] * a[y])) *
        inv;
      g[x * dk + y] = e;
      g[y * dk + x] = e;
    }
  }
  const delta =
    (d + 8) *
    8 *
    Number.EPSILON *
    (parts.trace[h] + aa / d + (Math.abs(c) * bb) / d + 2 * Math.abs(cross) * Math.sqrt(aa * bb)) *
    inv;
  for (let x = 0; x < dk; x++) g[x * dk + x] += delta;
  return g;
}
