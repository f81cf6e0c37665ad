import { spectralNorm, symMaxEigenvalue } from "../linalg.ts";
import type { FusedRows, HeadInput, HeadNorms, PreRowwise } from "./headTypes.ts";
import { queryPathExact } from "./queryPath.ts";
import {
  packedOuters,
  packedQuadraticForms,
  packedSize,
  packSymmetric,
  unpackSymmetric,
  weightedRowSums,
} from "./rowContractions.ts";

/** The options of attentionHeadBounds that `fused` reads. */
export interface FusedOptions {
  /** The row-wise map before the head ({@link PreRowwise}). */
  pre?: PreRowwise;
  /** Weights w_i >= 0 of the head's output rows [n]. */
  post?: ArrayLike<number>;
  /** Keep the per-row pieces ({@link FusedRows}; not with `post`). */
  keepRows?: boolean;
}

/** `fused`'s three paths at one input, and its per-row pieces when kept. */
export interface FusedPaths {
  value: number;
  query: number;
  key: number;
  rows?: FusedRows;
}

/** Throws when options.pre or options.post does not fit n rows of width d_k. */
function checkFusedOptions(options: FusedOptions, n: number, dk: number): void {
  const { pre, post } = options;
  if (
    pre !== undefined &&
    (pre.gramQ.length !== n * dk * dk ||
      pre.gramK.length !== n * dk * dk ||
      pre.kappa.length !== n ||
      pre.nu.length !== n)
  )
    throw new RangeError(`attention head: pre must hold ${n} rows of d_k = ${dk}`);
  if (post !== undefined && (post.length !== n || !Array.from(post).every((w) => w >= 0)))
    throw new RangeError(`attention head: post must hold ${n} weights >= 0`);
}

/**
 * `fused`'s value, query and key paths (docs/math.md section 2, `fused`): every path resolved by
 * token, after the row-wise map options.pre (L_j = I without one) and with the output rows
 * weighted by options.post. `shared` holds the head's value and key paths and, when
 * `exactComputed`, its exact query path, which `fused` reuses without a map.
 *
 * @throws RangeError when options.pre or options.post does not fit the head.
 * @example fusedPaths(head, norms, { valuePath, keyPath, queryPathExact: NaN, exactComputed: false }, {}).key
 */
export function fusedPaths(
  head: HeadInput,
  norms: HeadNorms,
  shared: { valuePath: number; keyPath: number; queryPathExact: number; exactComputed: boolean },
  options: FusedOptions,
): FusedPaths {
  const { n, dk, pm, rows } = head;
  checkFusedOptions(options, n, dk);
  const { pre, post } = options;
  const sqrtDk = Math.sqrt(dk);
  const kappa = pre?.kappa ?? new Float64Array(n).fill(norms.wk);
  // Value path: ||sum_j P_ij e_j L_j W_V|| <= sum_j P_ij nu_j ||e_j|| with P >= 0; without a
  // map every nu_j is ||W_V|| and this is the value path above.
  // Output rows weighted by options.post (a row-wise map after the layer): row i scaled by post_i.
  const keepRows = options.keepRows === true && post === undefined;
  let value: number;
  let kept: FusedRows | undefined;
  if (pre === undefined && post === undefined && !keepRows) value = shared.valuePath;
  else {
    const pNu = new Float64Array(n * n);
    for (let i = 0; i < n; i++)
      for (let j = 0; j < n; j++)
        pNu[i * n + j] = (post?.[i] ?? 1) * pm[i * n + j] * (pre?.nu[j] ?? norms.wv);
    value = spectralNorm(pNu, n, n);
    if (keepRows)
      kept = {
        n,
        dk,
        pNu,
        query2: new Float64Array(n),
        tau2: new Float64Array(n),
        q: Float64Array.from(head.q),
        pair2: new Float64Array(n),
        keyRelaxed: shared.keyPath * (pre?.factor ?? 1),
        live: rows.live,
      };
  }
  const query =
    pre === undefined && post === undefined && shared.exactComputed && !keepRows
      ? shared.queryPathExact
      : queryPathExact(
          head,
          (i) =>
            pre === undefined ? norms.gq : pre.gramQ.subarray(i * dk * dk, (i + 1) * dk * dk),
          post,
          kept?.query2,
        ) / sqrtDk;
  const [tokenKey, pairKey] = tokenKeyPaths(
    head,
    kappa,
    norms.gk,
    pre === undefined ? null : pre.gramK,
    post,
    kept,
  );
  let postMax = 1;
  if (post !== undefined) {
    postMax = 0;
    for (let i = 0; i < n; i++) if (rows.live[i]) postMax = Math.max(postMax, post[i]);
  }
  const key = Math.min(
    shared.keyPath * (pre?.factor ?? 1) * postMax,
    tokenKey / sqrtDk,
    pairKey / sqrtDk,
  );
  return { value, query, key, ...(kept !== undefined ? { rows: kept } : {}) };
}

/**
 * `fused` with output-row weights w (docs/math.md section 2, `fused`, "Output-row weights") from
 * the per-row pieces of an unweighted run: ||diag(w) P diag(nu)|| + max_i w_i sqrt(query2_i) /
 * sqrt(d_k) + the smallest key path. Equal to attentionHeadBounds' `fused` with options.post = w
 * (up to rounding; tested).
 *
 * @param w [n] weights >= 0.
 * @throws RangeError when w does not have n entries >= 0.
 * @example fusedWithRowWeights(head.fusedRows!, rho)
 */
export function fusedWithRowWeights(rows: FusedRows, w: ArrayLike<number>): number {
  const { n, dk, live } = rows;
  if (w.length !== n || !Array.from(w).every((x) => x >= 0))
    throw new RangeError(`attention head: row weights must be ${n} numbers >= 0`);
  const pw = new Float64Array(n * n);
  for (let i = 0; i < n; i++)
    for (let j = 0; j < n; j++) pw[i * n + j] = w[i] * rows.pNu[i * n + j];
  const value = spectralNorm(pw, n, n);
  let query2 = 0;
  let pair2 = 0;
  let wMax = 0;
  const cq = new Float64Array(dk * dk);
  for (let i = 0; i < n; i++) {
    if (!live[i]) continue;
    const w2 = w[i] * w[i];
    wMax = Math.max(wMax, w[i]);
    query2 = Math.max(query2, w2 * rows.query2[i]);
    pair2 += w2 * rows.pair2[i];
    const t = w2 * rows.tau2[i];
    if (t > 0)
      for (let a = 0; a < dk; a++)
        for (let b = 0; b < dk; b++) cq[a * dk + b] += t * rows.q[i * dk + a] * rows.q[i * dk + b];
  }
  const sqrtDk = Math.sqrt(dk);
  const key = Math.min(
    rows.keyRelaxed * wMax,
    Math.sqrt(Math.max(symMaxEigenvalue(cq, dk), 0)) / sqrtDk,
    Math.sqrt(pair2) / sqrtDk,
  );
  return value + Math.sqrt(query2) / sqrtDk + key;
}

/**
 * `fused`'s two token-resolved key paths before the 1/sqrt(d_k) (docs/math.md section 2,
 * `fused`), over the live rows i:
 * - ||diag(tau) Q||_2 with tau_i = ||V^T J_i diag(kappa)||_2;
 * - (sum_i ||V^T J_i diag(rho_i)||_2^2)^(1/2) with rho_ij = ||L_j W_K q_i^T|| (q_i W_K^T's
 *   alignment with each key row's map kept; `gramKRows` [n, d_k, d_k] holds
 *   (L_j W_K)^T (L_j W_K) per key row j, or null when every row's is `gramK`).
 * With w = P_i o c (c = kappa or rho_i) and m = V^T P_i, V^T J_i diag(c) = V^T diag(w) - m w^T,
 * whose Gram matrix sum_j w_j^2 v_j v_j^T - u m^T - m u^T + ||w||^2 m m^T (u = sum_j w_j^2 v_j)
 * is d_k x d_k. V is centred by the active-key mean mu (V^T J_i = V_c^T J_i +
 * (1 - sum P_i) mu P_i^T, kept exactly). The sums sum_j w_j^2 v_j v_j^T of all rows are one
 * product of the weights [n, n] with the packed outer products [n, d_k (d_k + 1) / 2]
 * (src/lipschitz/rules/rowContractions.ts), the same sums as row by row.
 */
function tokenKeyPaths(
  head: HeadInput,
  kappa: Float64Array,
  gramK: Float64Array,
  gramKRows: Float64Array | null,
  rowWeight?: ArrayLike<number>,
  keep?: FusedRows,
): [number, number] {
  const { n, dk, q, v, vMean, activeKey, pm, rows } = head;
  const dk2 = dk * dk;
  const width = packedSize(dk);
  const vc = new Float64Array(n * dk);
  for (let j = 0; j < n; j++)
    for (let c = 0; c < dk; c++) vc[j * dk + c] = v[j * dk + c] - vMean[c];
  const outer = packedOuters(vc, n, dk, activeKey);
  const visit: number[] = [];
  for (let i = 0; i < n; i++) {
    if (!rows.live[i]) continue;
    const w2 = rowWeight === undefined ? 1 : rowWeight[i] * rowWeight[i];
    if (w2 !== 0) visit.push(i);
  }
  // rho_ij^2 = q_i G_K,j q_i^T: [n, n] with a Gram matrix per key row, else [n, 1].
  const rho2 =
    gramKRows === null
      ? packedQuadraticForms(q, n, dk, packSymmetric(gramK, 1, dk), 1)
      : packedQuadraticForms(q, n, dk, packSymmetric(gramKRows, n, dk), n);
  const rhoCols = gramKRows === null ? 1 : n;
  // Squared column weights of both paths, (P_ij kappa_j)^2 and (P_ij rho_ij)^2.
  const wTau = new Float64Array(n * n);
  const wPair = new Float64Array(n * n);
  for (const i of visit)
    for (let j = 0; j < n; j++) {
      const p = pm[i * n + j];
      if (p === 0) continue;
      const wt = p * kappa[j];
      wTau[i * n + j] = wt * wt;
      const wp = p * Math.sqrt(Math.max(rho2[i * rhoCols + (rhoCols === 1 ? 0 : j)], 0));
      wPair[i * n + j] = wp * wp;
    }
  const sumsTau = weightedRowSums(visit, n, width, wTau, outer);
  const sumsPair = weightedRowSums(visit, n, width, wPair, outer);
  const g = new Float64Array(dk2);
  const m = new Float64Array(dk);
  const u = new Float64Array(dk);
  // lambda_max of the Gram matrix of V^T J_i diag(c) for row i, from its weights' row of w2s
  // (the squares (P_ij c_j)^2) and the packed sum_j w2s_ij v_j v_j^T.
  const squaredNorm = (i: number, w2s: Float64Array, sums: Float64Array, r: number) => {
    unpackSymmetric(sums.subarray(r * width, (r + 1) * width), dk, g);
    m.fill(0);
    u.fill(0);
    let mass = 0;
    let w2 = 0;
    for (let j = 0; j < n; j++) {
      const p = pm[i * n + j];
      if (p === 0) continue;
      mass += p;
      const ww = w2s[i * n + j];
      w2 += ww;
      for (let t = 0; t < dk; t++) {
        m[t] += p * vc[j * dk + t];
        u[t] += ww * vc[j * dk + t];
      }
    }
    for (let t = 0; t < dk; t++) m[t] -= (1 - mass) * vMean[t];
    for (let a = 0; a < dk; a++)
      for (let b = 0; b < dk; b++) g[a * dk + b] += -u[a] * m[b] - m[a] * u[b] + w2 * m[a] * m[b];
    return Math.max(symMaxEigenvalue(g, dk), 0);
  };
  const cq = new Float64Array(dk2); // Q^T diag(tau^2) Q
  let pairSum = 0;
  for (let r = 0; r < visit.length; r++) {
    const i = visit[r];
    const w2 = rowWeight === undefined ? 1 : rowWeight[i] * rowWeight[i];
    const tau2 = w2 * squaredNorm(i, wTau, sumsTau, r);
    if (keep !== undefined) keep.tau2[i] = tau2;
    if (tau2 > 0)
      for (let a = 0; a < dk; a++) {
        const qa = q[i * dk + a];
        for (let b = 0; b < dk; b++) cq[a * dk + b] += tau2 * qa * q[i * dk + b];
      }
    const pair = squaredNorm(i, wPair, sumsPair, r);
    if (keep !== undefined) keep.pair2[i] = pair;
    pairSum += w2 * pair;
  }
  return [Math.sqrt(Math.max(symMaxEigenvalue(cq, dk), 0)), Math.sqrt(pairSum)];
}
