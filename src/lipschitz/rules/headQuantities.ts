import { rowStats } from "../../softmax/rowStats.ts";
import { solveSecular } from "../../softmax/sigma.ts";
import { sigmaQuadFromStats, sigmaTop2FromStats } from "../../softmax/closedForm.ts";
import { congruence, gramCols, spectralNorm, symMaxEigenvalue } from "../linalg.ts";
import type { DotHeadQuantities, DotNeed } from "../variants/registry.ts";
import { fusedPaths, type FusedOptions } from "./fusedPaths.ts";
import type {
  FusedRows,
  HeadActivations,
  HeadInput,
  HeadNorms,
  HeadParts,
  HeadRowStats,
  InputNorms,
} from "./headTypes.ts";
import { queryPathExact } from "./queryPath.ts";

/**
 * The shared per-head quantities of dot-product attention at one input (docs/math.md section 2),
 * computed once per head for every variant that reads them (src/lipschitz/variants/): the
 * per-row sigma values, the norms of the centred keys, values and queries, and the value, query
 * and key paths; the costly ones (the exact query path, `fused`'s paths, the input's spectral
 * norms) only when a variant asked for needs them.
 */

/**
 * Per-row sigma values (exact, quad, top2), p_(1) and entropy of an attention map P [n, n].
 *
 * @param allowed optional [n, n] mask; masked positions count as zeros.
 */
export function headRowStats(
  p: ArrayLike<number>,
  n: number,
  allowed?: ArrayLike<number | boolean>,
): HeadRowStats {
  const live = new Uint8Array(n);
  const exact = new Float64Array(n);
  const quad = new Float64Array(n);
  const top2 = new Float64Array(n);
  const top = new Float64Array(n);
  const entropy = new Float64Array(n);
  for (let i = 0; i < n; i++) {
    let any = allowed === undefined;
    if (!any) for (let j = 0; j < n && !any; j++) any = Boolean(allowed![i * n + j]);
    if (!any) continue;
    live[i] = 1;
    const st = rowStats(p, i * n, n, allowed, i * n);
    exact[i] = solveSecular(st, p, i * n, allowed, i * n);
    quad[i] = sigmaQuadFromStats(st);
    top2[i] = sigmaTop2FromStats(st);
    top[i] = st.a;
    let h = 0;
    for (let j = 0; j < n; j++) {
      const v = allowed !== undefined && !allowed[i * n + j] ? 0 : p[i * n + j];
      if (v > 0) h -= v * Math.log(v);
    }
    entropy[i] = h;
  }
  return { live, exact, quad, top2, top, entropy };
}

/**
 * ||X||_2, ||[X, 1]||_2 and the largest row norms of a layer input X [n, d] (all rows).
 *
 * @param need which spectral norms to compute (each is an eigenvalue problem of size d or
 *   d + 1): `plain` ||X||_2 (heads without a query bias), `augmented` ||[X, 1]||_2 (heads with
 *   one); default both. One not asked for is NaN.
 * @throws RangeError when x has fewer than n*d entries.
 * @example inputNorms(x, n, d, { plain: true, augmented: false }).x
 */
export function inputNorms(
  x: ArrayLike<number>,
  n: number,
  d: number,
  need: { plain: boolean; augmented: boolean } = { plain: true, augmented: true },
): InputNorms {
  if (x.length < n * d)
    throw new RangeError(`inputNorms: expected ${n * d} entries, got ${x.length}`);
  const gram = need.plain || need.augmented;
  const g = new Float64Array(gram ? (d + 1) * (d + 1) : 0);
  let r2 = 0;
  for (let i = 0; i < n; i++) {
    let s = 0;
    for (let a = 0; a < d; a++) {
      const v = x[i * d + a];
      s += v * v;
      if (v === 0 || !gram) continue;
      for (let b = a; b < d; b++) g[a * (d + 1) + b] += v * x[i * d + b];
      g[a * (d + 1) + d] += v;
    }
    r2 = Math.max(r2, s);
  }
  if (!gram) return { x: NaN, xAug: NaN, r: Math.sqrt(r2), rAug: Math.sqrt(r2 + 1) };
  g[d * (d + 1) + d] = n;
  for (let a = 0; a <= d; a++) for (let b = 0; b < a; b++) g[a * (d + 1) + b] = g[b * (d + 1) + a];
  const plain = new Float64Array(d * d);
  for (let a = 0; a < d; a++) for (let b = 0; b < d; b++) plain[a * d + b] = g[a * (d + 1) + b];
  return {
    x: need.plain ? Math.sqrt(Math.max(symMaxEigenvalue(plain, d), 0)) : NaN,
    xAug: need.augmented ? Math.sqrt(Math.max(symMaxEigenvalue(g, d + 1), 0)) : NaN,
    r: Math.sqrt(r2),
    rAug: Math.sqrt(r2 + 1),
  };
}

/**
 * Checks one head's activations against its weights and copies them to float64 (one element kind
 * in the loops: float32 trace arrays and float64 test arrays would otherwise make them
 * polymorphic and several times slower), with the per-row statistics, the keys allowed for some
 * live row and the means of K and V over them.
 *
 * @throws RangeError on size mismatches.
 */
function headInput(act: HeadActivations, dk: number): HeadInput {
  const { n } = act;
  const { q: q0, k: k0, v: v0, p: p0, allowed: allowed0 } = act;
  if (q0.length !== n * dk || k0.length !== n * dk || v0.length !== n * dk)
    throw new RangeError(`attention head: q, k, v must have n*d_k = ${n * dk} entries`);
  if (p0.length !== n * n)
    throw new RangeError(`attention head: p must have n*n = ${n * n} entries, got ${p0.length}`);
  if (allowed0 !== undefined && allowed0.length !== n * n)
    throw new RangeError(
      `attention head: allowed must have n*n = ${n * n} entries, got ${allowed0.length}`,
    );
  const q = Float64Array.from(q0);
  const k = Float64Array.from(k0);
  const v = Float64Array.from(v0);
  const p = Float64Array.from(p0);
  const allowed =
    allowed0 === undefined ? undefined : Uint8Array.from(allowed0, (a) => (a ? 1 : 0));
  const rows = headRowStats(p, n, allowed);
  // Keys allowed for at least one query.
  const activeKey = new Uint8Array(n);
  for (let i = 0; i < n; i++) {
    if (!rows.live[i]) continue;
    for (let j = 0; j < n; j++) if (allowed === undefined || allowed[i * n + j]) activeKey[j] = 1;
  }
  const kMean = new Float64Array(dk);
  const vMean = new Float64Array(dk);
  let nActive = 0;
  for (let j = 0; j < n; j++) {
    if (!activeKey[j]) continue;
    nActive++;
    for (let c = 0; c < dk; c++) {
      kMean[c] += k[j * dk + c];
      vMean[c] += v[j * dk + c];
    }
  }
  for (let c = 0; c < dk; c++) {
    kMean[c] /= Math.max(nActive, 1);
    vMean[c] /= Math.max(nActive, 1);
  }
  // P with masked entries read as 0.
  const pm = new Float64Array(n * n);
  for (let i = 0; i < n * n; i++) pm[i] = allowed !== undefined && !allowed[i] ? 0 : p[i];
  return { n, dk, q, k, v, pm, rows, activeKey, kMean, vMean };
}

/** ||V_c||_2 and ||W_Q K_c^T||_2 with K_c, V_c centred over the active keys. */
function centredNorms(head: HeadInput, norms: HeadNorms): { vc: number; wqKc: number } {
  const { n, dk, k, v, activeKey, kMean, vMean } = head;
  let nActive = 0;
  for (let j = 0; j < n; j++) if (activeKey[j]) nActive++;
  const kc = new Float64Array(nActive * dk);
  const vc = new Float64Array(nActive * dk);
  for (let j = 0, r = 0; j < n; j++) {
    if (!activeKey[j]) continue;
    for (let c = 0; c < dk; c++) {
      kc[r * dk + c] = k[j * dk + c] - kMean[c];
      vc[r * dk + c] = v[j * dk + c] - vMean[c];
    }
    r++;
  }
  const ck = gramCols(kc, nActive, dk);
  return {
    vc: Math.sqrt(Math.max(symMaxEigenvalue(gramCols(vc, nActive, dk), dk), 0)),
    wqKc: Math.sqrt(Math.max(symMaxEigenvalue(congruence(norms.fq, ck, dk, dk), dk), 0)),
  };
}

/**
 * The largest sigma values over the live rows, and ||Q W_K^T||_2 and ||diag(s) Q W_K^T||_2 over
 * them (s_i exact sigma).
 */
function queryNorms(
  head: HeadInput,
  norms: HeadNorms,
): { sMax: DotHeadQuantities["sMax"]; anyLive: boolean; qWk: number; sQWk: number } {
  const { n, dk, q, rows } = head;
  const cq = new Float64Array(dk * dk);
  const cqs = new Float64Array(dk * dk);
  let sMax = { exact: 0, quad: 0, top2: 0 };
  let anyLive = false;
  for (let i = 0; i < n; i++) {
    if (!rows.live[i]) continue;
    anyLive = true;
    sMax = {
      exact: Math.max(sMax.exact, rows.exact[i]),
      quad: Math.max(sMax.quad, rows.quad[i]),
      top2: Math.max(sMax.top2, rows.top2[i]),
    };
    const s2 = rows.exact[i] * rows.exact[i];
    for (let a = 0; a < dk; a++) {
      const qa = q[i * dk + a];
      if (qa === 0) continue;
      for (let b = a; b < dk; b++) {
        const t = qa * q[i * dk + b];
        cq[a * dk + b] += t;
        cqs[a * dk + b] += s2 * t;
      }
    }
  }
  for (let a = 0; a < dk; a++)
    for (let b = 0; b < a; b++) {
      cq[a * dk + b] = cq[b * dk + a];
      cqs[a * dk + b] = cqs[b * dk + a];
    }
  const qWk = Math.sqrt(Math.max(symMaxEigenvalue(congruence(norms.fk, cq, dk, dk), dk), 0));
  const sQWk = Math.sqrt(Math.max(symMaxEigenvalue(congruence(norms.fk, cqs, dk, dk), dk), 0));
  return { sMax, anyLive, qWk, sQWk };
}

/** What {@link dotHeadQuantities} returns. */
export interface DotHeadResult {
  quantities: DotHeadQuantities;
  parts: HeadParts;
  rows: HeadRowStats;
  fusedRows?: FusedRows;
}

/**
 * The per-head quantities of one dot-product head at one input ({@link DotHeadQuantities}): the
 * always-computed ones and the costly ones in `needs`.
 *
 * @param act the head's activations ({@link HeadActivations}); x or xNorms is required.
 * @param norms the head's weight quantities.
 * @param needs the costly quantities to compute (registry.ts dotNeeds of the asked-for variants).
 * @param options `fused`'s row-wise map before the head, output-row weights and keepRows.
 * @throws RangeError when neither act.x nor act.xNorms is given, or on size mismatches.
 * @example dotHeadQuantities(act, norms, new Set(["queryPathExact"])).quantities.queryPathExact
 */
export function dotHeadQuantities(
  act: HeadActivations,
  norms: HeadNorms,
  needs: ReadonlySet<DotNeed>,
  options: FusedOptions = {},
): DotHeadResult {
  const { dk } = norms;
  const head = headInput(act, dk);
  let xn = act.xNorms;
  if (xn === undefined) {
    if (act.x === undefined) throw new RangeError("attention head: give x or xNorms");
    xn = inputNorms(act.x, act.n, norms.d);
  }
  const { n, rows } = head;
  const sqrtDk = Math.sqrt(dk);
  const { vc, wqKc } = centredNorms(head, norms);
  const { sMax, anyLive, qWk, sQWk } = queryNorms(head, norms);
  const normP = spectralNorm(head.pm, n, n);
  let queryRelaxed = 0;
  for (let i = 0; i < n; i++)
    if (rows.live[i]) queryRelaxed = Math.max(queryRelaxed, rows.exact[i]);
  // The exact query path costs n^2 d_k^2 per head: computed only when needed (cov).
  const exactComputed = needs.has("queryPathExact");
  const queryExact = exactComputed ? queryPathExact(head, () => norms.gq) / sqrtDk : NaN;
  queryRelaxed = (queryRelaxed * wqKc * vc) / sqrtDk;
  const keyPath = (sQWk * vc) / sqrtDk;
  const valuePath = normP * norms.wv;
  const fused = needs.has("fusedPaths")
    ? fusedPaths(
        head,
        norms,
        { valuePath, keyPath, queryPathExact: queryExact, exactComputed },
        options,
      )
    : { value: NaN, query: NaN, key: NaN };
  const aug = norms.augmented;
  const quantities: DotHeadQuantities = {
    n,
    dk,
    rows,
    anyLive,
    sMax,
    p: normP,
    wqKc,
    qWk,
    vc,
    wv: norms.wv,
    augmented: aug,
    a: aug ? norms.aAug : norms.a,
    x: aug ? xn.xAug : xn.x,
    r: aug ? xn.rAug : xn.r,
    valuePath,
    queryPathRelaxed: queryRelaxed,
    keyPath,
    queryPathExact: queryExact,
    fusedValuePath: fused.value,
    fusedQueryPath: fused.query,
    fusedKeyPath: fused.key,
    mapped: options.pre !== undefined || options.post !== undefined,
    computed: needs,
  };
  const parts: HeadParts = {
    valuePath,
    queryPathExact: queryExact,
    queryPathRelaxed: queryRelaxed,
    keyPath,
    fusedValuePath: fused.value,
    fusedQueryPath: fused.query,
    fusedKeyPath: fused.key,
    p: normP,
    wqKc,
    qWk,
    vc,
  };
  return {
    quantities,
    parts,
    rows,
    ...(fused.rows !== undefined ? { fusedRows: fused.rows } : {}),
  };
}
