import { congruence, spectralNorm, sqrtFactor, symMaxEigenvalue } from "../linalg.ts";
import {
  boundVariant,
  variantNames,
  type L2HeadQuantities,
  type L2Need,
} from "../variants/index.ts";
import { headRowStats } from "./headQuantities.ts";
import type { HeadRowStats } from "./headTypes.ts";

/**
 * Local Lipschitz bounds of ONE L2 self-attention head at an input X (Kim, Papamakarios and
 * Mnih's L2-MHA; docs/math.md section 2, "Local bounds of L2 attention"), in float64.
 *
 * The head: q_i = x_i W (W = W^{Q,h} [d, d_k], tied with the keys), S_ij = -||q_i - q_j||^2 /
 * sqrt(d_k), P_i = softmax(S_i) over the allowed keys (masked entries exactly 0; a row with no
 * allowed key is 0), values v_j = q_j M with M = W^T W_V / sqrt(d_k) [d_k, d_k] (= x_j A W_V,
 * A = W W^T / sqrt(d_k); a value bias is a constant and drops out), f(X) = P V [n, d_k]. The
 * bounds are on ||Df(X)||_2 with X and f(X) in the Frobenius norm: the local constant at this X,
 * not over a neighbourhood.
 */

/** A local variant of L2 attention (`l2-dist`, `l2-cov`, or one registered since). */
export type L2HeadVariant = string;

/** Input-independent quantities of one L2 head ({@link l2HeadWeights}). */
export interface L2HeadWeights {
  d: number;
  dk: number;
  /** G = W^T W [d_k, d_k] and a factor F with F^T F = G. */
  g: Float64Array;
  f: Float64Array;
  /** M = W^T W_V / sqrt(d_k) [d_k, d_k] and its transpose. */
  m: Float64Array;
  mt: Float64Array;
  /** ||W||_2, ||M||_2 and ||W M||_2 = ||A W_V||_2 (the value path's weight factor). */
  w: number;
  mNorm: number;
  awv: number;
}

/**
 * The weight quantities of one L2 head from W = W^{Q,h} and W_V^h [d, d_k] (row-major).
 *
 * @throws RangeError when the lengths are not d * d_k.
 * @example l2HeadWeights(wq, wv, 4, 2).awv // ||W W^T W_V|| / sqrt(2)
 */
export function l2HeadWeights(
  wq: ArrayLike<number>,
  wv: ArrayLike<number>,
  d: number,
  dk: number,
): L2HeadWeights {
  if (wq.length !== d * dk || wv.length !== d * dk)
    throw new RangeError(`l2 head weights: W_Q and W_V must have ${d * dk} entries`);
  const g = new Float64Array(dk * dk);
  const m = new Float64Array(dk * dk);
  const s = Math.sqrt(dk);
  for (let a = 0; a < dk; a++)
    for (let b = 0; b < dk; b++) {
      let sg = 0;
      let sm = 0;
      for (let i = 0; i < d; i++) {
        sg += wq[i * dk + a] * wq[i * dk + b];
        sm += wq[i * dk + a] * wv[i * dk + b];
      }
      g[a * dk + b] = sg;
      m[a * dk + b] = sm / s;
    }
  const mt = new Float64Array(dk * dk);
  for (let a = 0; a < dk; a++) for (let b = 0; b < dk; b++) mt[b * dk + a] = m[a * dk + b];
  const top = (x: Float64Array) => Math.sqrt(Math.max(symMaxEigenvalue(x, dk), 0));
  return {
    d,
    dk,
    g,
    f: sqrtFactor(g, dk),
    m,
    mt,
    w: top(g),
    mNorm: spectralNorm(m, dk, dk),
    // ||W M||^2 = lambda_max(M^T G M).
    awv: top(congruence(mt, g, dk, dk)),
  };
}

/** The paths of {@link l2HeadBounds} (docs/math.md section 2, "Local bounds of L2 attention"). */
export interface L2HeadParts {
  /** ||P||_2 ||A W_V||_2 (exact for the value path). */
  valuePath: number;
  /** `l2-dist`'s query path: c max_i min(s_i ||W Q_c^T|| ||V_c||, ||W|| ||M|| t_i). */
  queryDist: number;
  /** `l2-cov`'s query path: c max_i ||W C_i M|| (exact for the query path); NaN without l2-cov. */
  queryCov: number;
  /** `l2-dist`'s key path: the smallest of D1, D3 (sigma) and D4 (spread). */
  keyDist: number;
  /** `l2-cov`'s key path: the smallest of K1, K2, K3 and keyDist; NaN without l2-cov. */
  keyCov: number;
  /**
   * The key-path forms (c included): D1, D3 (sigma), D4 (spread), K1, K2, K3 (row-exact; NaN
   * without l2-cov).
   */
  keyForms: { d1: number; d3: number; d4: number; k1: number; k2: number; k3: number };
  /** ||P||_2, ||W Q_c^T||_2 and ||V_c||_2 (centred over the active keys). */
  p: number;
  wQc: number;
  vc: number;
}

/** Result of {@link l2HeadBounds}. */
export interface L2HeadBounds {
  values: Partial<Record<L2HeadVariant, number>>;
  parts: L2HeadParts;
  rows: HeadRowStats;
}

/**
 * The local variants of L2 attention (registered with kind "l2": `l2-dist`, `l2-cov`) for one L2
 * head at one input, each from the head's quantities ({@link l2HeadQuantities}) by its record
 * (src/lipschitz/variants/l2Local.ts). The built-ins (docs/math.md section 2, "Local bounds of
 * L2 attention"). With c = 2 / sqrt(d_k), s_i = sigma(P_i), rho_ij = ||W (q_i - q_j)^T||,
 * qbar_i = P_i Q, vbar_i = qbar_i M and C_i = Q^T J_i Q (the P_i-covariance of the queries):
 *
 * - value path (both): ||P||_2 ||A W_V||_2;
 * - query path: `l2-dist` c max_i min(s_i ||W Q_c^T|| ||V_c||, ||W|| ||M|| t_i), t_i the
 *   P_i-weighted spread sum_j P_ij ||q_j - qbar_i||^2; `l2-cov` c max_i ||W C_i M|| (exact);
 * - key path: `l2-dist` the smallest of c ||V_c|| max_j (sum_i s_i^2 rho_ij^2)^(1/2),
 *   c ||V_c|| max_j (sum_i s_i P_ij rho_ij^2)^(1/2) and c ||M|| max_j (sum_i t_i P_ij rho_ij^2)^(1/2);
 *   `l2-cov` the smallest of that and
 *   K1 = ||K||_2 with K_ij = c P_ij rho_ij ||v_j - vbar_i||,
 *   K2 = c (sum_i lambda_max(sum_j P_ij^2 rho_ij^2 (v_j - vbar_i)(v_j - vbar_i)^T))^(1/2),
 *   K3 = c max_j (sum_i ||Cov_i(v)|| P_ij rho_ij^2)^(1/2), Cov_i(v) = sum_j P_ij (v_j - vbar_i)(..)^T.
 *
 * Masks: sums over j run over the keys with P_ij > 0 (a masked or underflowed key has a zero row
 * and column in J_i, so it contributes nothing to the score paths); Q_c and V_c are centred over
 * the keys allowed for some live query row; rows with no allowed key contribute nothing. Padded
 * query rows that attend to the real keys are ordinary rows.
 *
 * @param act n, Q = X W [n, d_k], P [n, n] (float64 recommended: the bound is for this P), and
 *   the optional allowed mask [n, n] (row = query).
 * @param w the head's {@link L2HeadWeights}.
 * @param variants which to compute (default every registered local variant of L2 attention);
 *   without one that needs `rowExact` (`l2-cov`) the O(n^2 d_k^2) parts are skipped.
 * @throws RangeError on size mismatches, or naming a variant that is not a registered local
 *   variant of L2 attention.
 * @example l2HeadBounds({ n, q, p }, l2HeadWeights(wq, wv, d, dk)).values["l2-cov"]
 */
export function l2HeadBounds(
  act: L2Activations,
  w: L2HeadWeights,
  variants: readonly L2HeadVariant[] = variantNames("l2").filter(
    (v) => boundVariant(v).kind === "l2",
  ),
): L2HeadBounds {
  const specs = variants.map((name) => {
    const spec = boundVariant(name, "l2 head");
    if (spec.kind !== "l2")
      throw new RangeError(`l2 head: "${name}" is not a local variant of L2 attention`);
    return spec;
  });
  const needs = new Set<L2Need>(specs.flatMap((s) => s.needs));
  const { quantities, parts, rows } = l2HeadQuantities(act, w, needs);
  const values: Partial<Record<L2HeadVariant, number>> = {};
  for (const spec of specs) values[spec.name] = spec.compute(quantities);
  return { values, parts, rows };
}

/** One L2 head's activations at one input: n, Q = X W [n, d_k], P [n, n], allowed [n, n]. */
export interface L2Activations {
  n: number;
  q: ArrayLike<number>;
  p: ArrayLike<number>;
  allowed?: ArrayLike<number | boolean>;
}

/** One L2 head at one input in float64, as its paths share it. */
interface L2Input {
  n: number;
  dk: number;
  /** Q [n, d_k], V = Q M and Z = Q F^T [n, d_k] (rho_ij = ||z_i - z_j||). */
  q: Float64Array;
  v: Float64Array;
  z: Float64Array;
  /** P with masked entries 0 [n, n]. */
  pm: Float64Array;
  rows: HeadRowStats;
  /** 2 / sqrt(d_k). */
  c: number;
  /** ||V_c||_2, ||W Q_c^T||_2 (centred over the active keys) and ||P||_2. */
  vc: number;
  wQc: number;
  p: number;
}

/**
 * Checks one L2 head's activations and copies them to float64, with the per-row statistics, the
 * centred norms ||V_c|| and ||W Q_c^T||, ||P||, and V = Q M, Z = Q F^T.
 *
 * @throws RangeError on size mismatches.
 */
function l2Input(act: L2Activations, w: L2HeadWeights): L2Input {
  const { n } = act;
  const { dk } = w;
  if (act.q.length !== n * dk)
    throw new RangeError(`l2 head: q must have n*d_k = ${n * dk} entries, got ${act.q.length}`);
  if (act.p.length !== n * n)
    throw new RangeError(`l2 head: p must have n*n = ${n * n} entries, got ${act.p.length}`);
  if (act.allowed !== undefined && act.allowed.length !== n * n)
    throw new RangeError(`l2 head: allowed must have n*n = ${n * n} entries`);
  const q = Float64Array.from(act.q);
  const allowed =
    act.allowed === undefined ? undefined : Uint8Array.from(act.allowed, (a) => (a ? 1 : 0));
  const pm = Float64Array.from(act.p, (v, t) => (allowed !== undefined && !allowed[t] ? 0 : v));
  const rows = headRowStats(pm, n, allowed);
  const cq = activeCovariance(q, n, dk, rows, allowed);
  const top = (x: Float64Array) => Math.max(symMaxEigenvalue(x, dk), 0);
  // ||V_c||^2 = lambda_max(M^T C M), ||W Q_c^T||^2 = lambda_max(F C F^T).
  const vc = Math.sqrt(top(congruence(w.mt, cq, dk, dk)));
  const wQc = Math.sqrt(top(congruence(w.f, cq, dk, dk)));
  const normP = spectralNorm(pm, n, n);
  // V = Q M and Z = Q F^T (rho_ij = ||z_i - z_j||, with no cancellation of large ||q||).
  const v = new Float64Array(n * dk);
  const z = new Float64Array(n * dk);
  for (let j = 0; j < n; j++)
    for (let b = 0; b < dk; b++) {
      let sv = 0;
      let sz = 0;
      for (let a = 0; a < dk; a++) {
        sv += q[j * dk + a] * w.m[a * dk + b];
        sz += q[j * dk + a] * w.f[b * dk + a];
      }
      v[j * dk + b] = sv;
      z[j * dk + b] = sz;
    }
  return { n, dk, q, v, z, pm, rows, c: 2 / Math.sqrt(dk), vc, wQc, p: normP };
}

/**
 * C = sum_j (q_j - mu)(q_j - mu)^T [d_k, d_k] over the active keys (allowed for some live row),
 * mu their mean query.
 */
function activeCovariance(
  q: Float64Array,
  n: number,
  dk: number,
  rows: HeadRowStats,
  allowed: Uint8Array | undefined,
): Float64Array {
  const active = new Uint8Array(n);
  for (let i = 0; i < n; i++) {
    if (!rows.live[i]) continue;
    for (let j = 0; j < n; j++) if (allowed === undefined || allowed[i * n + j]) active[j] = 1;
  }
  const mu = new Float64Array(dk);
  let nActive = 0;
  for (let j = 0; j < n; j++) {
    if (!active[j]) continue;
    nActive++;
    for (let a = 0; a < dk; a++) mu[a] += q[j * dk + a];
  }
  for (let a = 0; a < dk; a++) mu[a] /= Math.max(nActive, 1);
  const cq = new Float64Array(dk * dk);
  for (let j = 0; j < n; j++) {
    if (!active[j]) continue;
    for (let a = 0; a < dk; a++) {
      const ea = q[j * dk + a] - mu[a];
      for (let b = 0; b < dk; b++) cq[a * dk + b] += ea * (q[j * dk + b] - mu[b]);
    }
  }
  return cq;
}

/** Per-row work arrays of {@link rowTerms}. */
interface RowScratch {
  qbar: Float64Array;
  vbar: Float64Array;
  dq: Float64Array;
  dv: Float64Array;
  /** C_i M with the exact (1 - m_i) correction. */
  cm: Float64Array;
  /** Cov_i(v). */
  vv: Float64Array;
  /** sum_j P_ij^2 rho_ij^2 dv dv^T. */
  vk: Float64Array;
}

/** What the rows give the paths: per pair rho_ij^2 and K_ij, per row ||Cov_i(v)|| and t_i, and the query-path maxima. */
interface RowTerms {
  rho2: Float64Array;
  kMat: Float64Array;
  covV: Float64Array;
  spreads: Float64Array;
  queryDist: number;
  queryCov2: number;
  pairSum: number;
}

/**
 * qbar_i = sum_j P_ij q_j and vbar_i = qbar_i M of row i (into s.qbar, s.vbar).
 *
 * @returns the row's mass m_i = sum_j P_ij.
 */
function rowMeans(i: number, inp: L2Input, w: L2HeadWeights, s: RowScratch): number {
  const { n, dk, q, pm } = inp;
  const { qbar, vbar } = s;
  let mass = 0;
  qbar.fill(0);
  for (let j = 0; j < n; j++) {
    const pij = pm[i * n + j];
    if (pij === 0) continue;
    mass += pij;
    for (let a = 0; a < dk; a++) qbar[a] += pij * q[j * dk + a];
  }
  for (let b = 0; b < dk; b++) {
    let sum = 0;
    for (let a = 0; a < dk; a++) sum += qbar[a] * w.m[a * dk + b];
    vbar[b] = sum;
  }
  return mass;
}

/**
 * Row i's pass over its keys: rho_ij^2 (into t.rho2) and its spread t_i; with `exact`, K_ij
 * (into t.kMat) and the row's sums C_i M, Cov_i(v) and sum_j P_ij^2 rho_ij^2 dv dv^T (into s).
 *
 * @returns the spread sum_j P_ij ||q_j - qbar_i||^2.
 */
function rowKeys(i: number, inp: L2Input, exact: boolean, s: RowScratch, t: RowTerms): number {
  const { n, dk, q, v, z, pm, c } = inp;
  const { qbar, vbar, dq, dv, cm, vv, vk } = s;
  if (exact) {
    cm.fill(0);
    vv.fill(0);
    vk.fill(0);
  }
  let spread = 0;
  for (let j = 0; j < n; j++) {
    const pij = pm[i * n + j];
    if (pij === 0) continue;
    let r2 = 0;
    for (let a = 0; a < dk; a++) r2 += (z[i * dk + a] - z[j * dk + a]) ** 2;
    t.rho2[i * n + j] = r2;
    let dq2 = 0;
    let dv2 = 0;
    for (let a = 0; a < dk; a++) {
      dq[a] = q[j * dk + a] - qbar[a];
      dv[a] = v[j * dk + a] - vbar[a];
      dq2 += dq[a] * dq[a];
      dv2 += dv[a] * dv[a];
    }
    spread += pij * dq2;
    if (!exact) continue;
    t.kMat[i * n + j] = c * pij * Math.sqrt(r2 * dv2);
    const wk = pij * pij * r2;
    for (let a = 0; a < dk; a++) {
      const pa = pij * dq[a];
      const va = pij * dv[a];
      const ka = wk * dv[a];
      for (let b = 0; b < dk; b++) {
        cm[a * dk + b] += pa * dv[b];
        vv[a * dk + b] += va * dv[b];
        vk[a * dk + b] += ka * dv[b];
      }
    }
  }
  return spread;
}

/** Every live row's share of the query and key paths ({@link RowTerms}). */
function rowTerms(inp: L2Input, w: L2HeadWeights, exact: boolean): RowTerms {
  const { n, dk, q, rows, c } = inp;
  const t: RowTerms = {
    rho2: new Float64Array(n * n),
    kMat: new Float64Array(exact ? n * n : 0),
    covV: new Float64Array(n), // ||Cov_i(v)||
    spreads: new Float64Array(n), // t_i = tr sum_j P_ij dq dq^T
    queryDist: 0,
    queryCov2: 0,
    pairSum: 0,
  };
  const s: RowScratch = {
    qbar: new Float64Array(dk),
    vbar: new Float64Array(dk),
    dq: new Float64Array(dk),
    dv: new Float64Array(dk),
    cm: new Float64Array(dk * dk),
    vv: new Float64Array(dk * dk),
    vk: new Float64Array(dk * dk),
  };
  const { qbar, vbar, cm } = s;
  const top = (x: Float64Array) => Math.max(symMaxEigenvalue(x, dk), 0);
  for (let i = 0; i < n; i++) {
    if (!rows.live[i]) continue;
    const mass = rowMeans(i, inp, w, s);
    const spread = rowKeys(i, inp, exact, s, t);
    // Query path: E_i^T J_i Q = (1 - m_i) q_i qbar_i^T - C_i and C_i = sum_j P_ij dq dq^T +
    // (1 - m_i) qbar qbar^T, so E_i^T J_i Q M = -(sum_j P_ij dq dv^T + (1 - m_i)(qbar - q_i) vbar^T).
    const rest = 1 - mass;
    let qbarQi = 0;
    let qbar2 = 0;
    for (let a = 0; a < dk; a++) {
      qbarQi += (qbar[a] - q[i * dk + a]) ** 2;
      qbar2 += qbar[a] * qbar[a];
    }
    t.spreads[i] = spread;
    // ||C_i'|| <= its trace part plus the rank-one correction's norm.
    const ti = spread + Math.abs(rest) * Math.sqrt(qbarQi * qbar2);
    t.queryDist = Math.max(
      t.queryDist,
      c * Math.min(rows.exact[i] * inp.wQc * inp.vc, w.w * w.mNorm * ti),
    );
    if (!exact) continue;
    for (let a = 0; a < dk; a++)
      for (let b = 0; b < dk; b++) cm[a * dk + b] += rest * (qbar[a] - q[i * dk + a]) * vbar[b];
    // ||W C_i' M||^2 = lambda_max((C_i' M)^T G (C_i' M)).
    const cmt = new Float64Array(dk * dk);
    for (let a = 0; a < dk; a++) for (let b = 0; b < dk; b++) cmt[b * dk + a] = cm[a * dk + b];
    t.queryCov2 = Math.max(t.queryCov2, top(congruence(cmt, w.g, dk, dk)));
    t.covV[i] = top(s.vv);
    t.pairSum += top(s.vk);
  }
  return t;
}

/** The key-path forms D1, D3, D4 and, with `exact`, K1, K2, K3 (c included). */
function keyForms(
  inp: L2Input,
  w: L2HeadWeights,
  t: RowTerms,
  exact: boolean,
): L2HeadParts["keyForms"] {
  const { n, pm, rows, c, vc } = inp;
  // Key-path sums over the query rows i for each key j.
  let d1 = 0;
  let d3 = 0;
  let d4 = 0;
  let k3 = 0;
  for (let j = 0; j < n; j++) {
    let s1 = 0;
    let s3 = 0;
    let s4 = 0;
    let s5 = 0;
    for (let i = 0; i < n; i++) {
      const pij = pm[i * n + j];
      if (pij === 0 || !rows.live[i]) continue;
      const r2 = t.rho2[i * n + j];
      const s = rows.exact[i];
      s1 += s * s * r2;
      s3 += s * pij * r2;
      s4 += t.covV[i] * pij * r2;
      s5 += t.spreads[i] * pij * r2;
    }
    d1 = Math.max(d1, s1);
    d3 = Math.max(d3, s3);
    d4 = Math.max(d4, s5);
    k3 = Math.max(k3, s4);
  }
  return {
    d1: c * vc * Math.sqrt(d1),
    d3: c * vc * Math.sqrt(d3),
    // ||Cov_i(v)|| = ||M^T C_i M|| <= ||M||^2 t_i.
    d4: c * w.mNorm * Math.sqrt(d4),
    k1: exact ? spectralNorm(t.kMat, n, n) : NaN,
    k2: exact ? c * Math.sqrt(t.pairSum) : NaN,
    k3: exact ? c * Math.sqrt(k3) : NaN,
  };
}

/**
 * The per-head quantities of one L2 head at one input (docs/math.md section 2, "Local bounds of
 * L2 attention"; {@link L2HeadQuantities}): the value, query and key paths of {@link l2HeadBounds},
 * the row-exact ones (`l2-cov`'s, O(n^2 d_k^2)) only with the need `rowExact`.
 *
 * @throws RangeError on size mismatches.
 * @example l2HeadQuantities({ n, q, p }, w, new Set()).quantities.queryDist
 */
export function l2HeadQuantities(
  act: L2Activations,
  w: L2HeadWeights,
  needs: ReadonlySet<L2Need>,
): { quantities: L2HeadQuantities; parts: L2HeadParts; rows: HeadRowStats } {
  const exact = needs.has("rowExact");
  const inp = l2Input(act, w);
  const valuePath = inp.p * w.awv;
  const terms = rowTerms(inp, w, exact);
  const forms = keyForms(inp, w, terms, exact);
  const keyDist = Math.min(forms.d1, forms.d3, forms.d4);
  const keyCov = exact ? Math.min(keyDist, forms.k1, forms.k2, forms.k3) : NaN;
  // The exact query path is at most l2-dist's (docs/math.md); the min keeps it so in rounding.
  const queryDist = terms.queryDist;
  const queryCov = exact ? Math.min(inp.c * Math.sqrt(terms.queryCov2), queryDist) : NaN;
  const parts: L2HeadParts = {
    valuePath,
    queryDist,
    queryCov,
    keyDist,
    keyCov,
    keyForms: forms,
    p: inp.p,
    wQc: inp.wQc,
    vc: inp.vc,
  };
  return {
    quantities: { n: inp.n, dk: inp.dk, rows: inp.rows, ...parts, computed: needs },
    parts,
    rows: inp.rows,
  };
}

/**
 * The attention probabilities of one L2 head in float64 from its queries (keys tied):
 * P_i = softmax(-||q_i - q_j||^2 / sqrt(d_k)) over the allowed keys j, masked entries 0, a row
 * with no allowed key 0 (src/nn/l2Attention.ts, recomputed so that the local bounds are for
 * float64 probabilities).
 *
 * @param q [n, d_k] queries. @param allowed optional [n, n] (row = query), nonzero = may attend.
 * @returns P [n, n] row-major.
 * @throws RangeError when q or allowed has the wrong length.
 * @example l2Probabilities64(Float64Array.of(0, 0), 2, 1) // [0.5, 0.5, 0.5, 0.5]
 */
export function l2Probabilities64(
  q: ArrayLike<number>,
  n: number,
  dk: number,
  allowed?: ArrayLike<number | boolean>,
): Float64Array {
  if (q.length !== n * dk)
    throw new RangeError(
      `l2Probabilities64: q must have n*d_k = ${n * dk} entries, got ${q.length}`,
    );
  if (allowed !== undefined && allowed.length !== n * n)
    throw new RangeError(`l2Probabilities64: allowed must have n*n = ${n * n} entries`);
  const p = new Float64Array(n * n);
  const s = new Float64Array(n);
  for (let i = 0; i < n; i++) {
    s.fill(-Infinity);
    let max = -Infinity;
    for (let j = 0; j < n; j++) {
      if (allowed && !allowed[i * n + j]) continue;
      let dist = 0;
      for (let c = 0; c < dk; c++) dist += (q[i * dk + c] - q[j * dk + c]) ** 2;
      s[j] = -dist / Math.sqrt(dk);
      max = Math.max(max, s[j]);
    }
    if (max === -Infinity) continue;
    let z = 0;
    for (let j = 0; j < n; j++) z += s[j] === -Infinity ? 0 : Math.exp(s[j] - max);
    for (let j = 0; j < n; j++) p[i * n + j] = s[j] === -Infinity ? 0 : Math.exp(s[j] - max) / z;
  }
  return p;
}
