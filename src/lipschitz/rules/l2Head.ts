import { headRowStats, L2_LOCAL_VARIANTS, type HeadRowStats } from "./attentionHead.ts";
import { congruence, spectralNorm, sqrtFactor, symMaxEigenvalue } from "../linalg.ts";

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

/** One of the L2 local variants (`l2-dist`, `l2-cov`; attentionHead.ts L2_LOCAL_VARIANTS). */
export type L2HeadVariant = (typeof L2_LOCAL_VARIANTS)[number];

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
 * `l2-dist` and `l2-cov` for one L2 head at one input (docs/math.md section 2, "Local bounds of
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
 * @param variants which to compute (default both); without `l2-cov` its O(n^2 d_k^2) parts are
 *   skipped.
 * @throws RangeError on size mismatches.
 */
export function l2HeadBounds(
  act: {
    n: number;
    q: ArrayLike<number>;
    p: ArrayLike<number>;
    allowed?: ArrayLike<number | boolean>;
  },
  w: L2HeadWeights,
  variants: readonly L2HeadVariant[] = L2_LOCAL_VARIANTS,
): L2HeadBounds {
  const { n } = act;
  const { dk } = w;
  if (act.q.length !== n * dk)
    throw new RangeError(`l2 head: q must have n*d_k = ${n * dk} entries, got ${act.q.length}`);
  if (act.p.length !== n * n)
    throw new RangeError(`l2 head: p must have n*n = ${n * n} entries, got ${act.p.length}`);
  if (act.allowed !== undefined && act.allowed.length !== n * n)
    throw new RangeError(`l2 head: allowed must have n*n = ${n * n} entries`);
  const exact = variants.includes("l2-cov");
  const q = Float64Array.from(act.q);
  const allowed =
    act.allowed === undefined ? undefined : Uint8Array.from(act.allowed, (a) => (a ? 1 : 0));
  const pm = Float64Array.from(act.p, (v, t) => (allowed !== undefined && !allowed[t] ? 0 : v));
  const rows = headRowStats(pm, n, allowed);
  const c = 2 / Math.sqrt(dk);

  // Active keys (allowed for some live row), their mean query mu and C = sum (q_j - mu)(..)^T.
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
  const top = (x: Float64Array) => Math.max(symMaxEigenvalue(x, dk), 0);
  // ||V_c||^2 = lambda_max(M^T C M), ||W Q_c^T||^2 = lambda_max(F C F^T).
  const vc = Math.sqrt(top(congruence(w.mt, cq, dk, dk)));
  const wQc = Math.sqrt(top(congruence(w.f, cq, dk, dk)));
  const normP = spectralNorm(pm, n, n);
  const valuePath = normP * w.awv;

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

  const rho2 = new Float64Array(n * n);
  const kMat = new Float64Array(exact ? n * n : 0);
  const covV = new Float64Array(n); // ||Cov_i(v)||
  const spreads = new Float64Array(n); // t_i = tr sum_j P_ij dq dq^T
  let queryDist = 0;
  let queryCov2 = 0;
  let pairSum = 0;
  const qbar = new Float64Array(dk);
  const vbar = new Float64Array(dk);
  const dq = new Float64Array(dk);
  const dv = new Float64Array(dk);
  const cm = new Float64Array(dk * dk); // C_i M with the exact (1 - m_i) correction
  const vv = new Float64Array(dk * dk); // Cov_i(v)
  const vk = new Float64Array(dk * dk); // sum_j P_ij^2 rho_ij^2 dv dv^T
  for (let i = 0; i < n; i++) {
    if (!rows.live[i]) continue;
    let mass = 0;
    qbar.fill(0);
    for (let j = 0; j < n; j++) {
      const pij = pm[i * n + j];
      if (pij === 0) continue;
      mass += pij;
      for (let a = 0; a < dk; a++) qbar[a] += pij * q[j * dk + a];
    }
    for (let b = 0; b < dk; b++) {
      let s = 0;
      for (let a = 0; a < dk; a++) s += qbar[a] * w.m[a * dk + b];
      vbar[b] = s;
    }
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
      rho2[i * n + j] = r2;
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
      kMat[i * n + j] = c * pij * Math.sqrt(r2 * dv2);
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
    // Query path: E_i^T J_i Q = (1 - m_i) q_i qbar_i^T - C_i and C_i = sum_j P_ij dq dq^T +
    // (1 - m_i) qbar qbar^T, so E_i^T J_i Q M = -(sum_j P_ij dq dv^T + (1 - m_i)(qbar - q_i) vbar^T).
    const rest = 1 - mass;
    let qbarQi = 0;
    let qbar2 = 0;
    for (let a = 0; a < dk; a++) {
      qbarQi += (qbar[a] - q[i * dk + a]) ** 2;
      qbar2 += qbar[a] * qbar[a];
    }
    spreads[i] = spread;
    // ||C_i'|| <= its trace part plus the rank-one correction's norm.
    const ti = spread + Math.abs(rest) * Math.sqrt(qbarQi * qbar2);
    queryDist = Math.max(queryDist, c * Math.min(rows.exact[i] * wQc * vc, w.w * w.mNorm * ti));
    if (!exact) continue;
    for (let a = 0; a < dk; a++)
      for (let b = 0; b < dk; b++) cm[a * dk + b] += rest * (qbar[a] - q[i * dk + a]) * vbar[b];
    // ||W C_i' M||^2 = lambda_max((C_i' M)^T G (C_i' M)).
    const cmt = new Float64Array(dk * dk);
    for (let a = 0; a < dk; a++) for (let b = 0; b < dk; b++) cmt[b * dk + a] = cm[a * dk + b];
    queryCov2 = Math.max(queryCov2, top(congruence(cmt, w.g, dk, dk)));
    covV[i] = top(vv);
    pairSum += top(vk);
  }

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
      const r2 = rho2[i * n + j];
      const s = rows.exact[i];
      s1 += s * s * r2;
      s3 += s * pij * r2;
      s4 += covV[i] * pij * r2;
      s5 += spreads[i] * pij * r2;
    }
    d1 = Math.max(d1, s1);
    d3 = Math.max(d3, s3);
    d4 = Math.max(d4, s5);
    k3 = Math.max(k3, s4);
  }
  const forms = {
    d1: c * vc * Math.sqrt(d1),
    d3: c * vc * Math.sqrt(d3),
    // ||Cov_i(v)|| = ||M^T C_i M|| <= ||M||^2 t_i.
    d4: c * w.mNorm * Math.sqrt(d4),
    k1: exact ? spectralNorm(kMat, n, n) : NaN,
    k2: exact ? c * Math.sqrt(pairSum) : NaN,
    k3: exact ? c * Math.sqrt(k3) : NaN,
  };
  const keyDist = Math.min(forms.d1, forms.d3, forms.d4);
  const keyCov = exact ? Math.min(keyDist, forms.k1, forms.k2, forms.k3) : NaN;
  // The exact query path is at most l2-dist's (docs/math.md); the min keeps it so in rounding.
  const queryCov = exact ? Math.min(c * Math.sqrt(queryCov2), queryDist) : NaN;
  const values: Partial<Record<L2HeadVariant, number>> = {};
  if (variants.includes("l2-dist")) values["l2-dist"] = valuePath + queryDist + keyDist;
  if (exact) values["l2-cov"] = valuePath + queryCov + keyCov;
  return {
    values,
    parts: {
      valuePath,
      queryDist,
      queryCov,
      keyDist,
      keyCov,
      keyForms: forms,
      p: normP,
      wQc,
      vc,
    },
    rows,
  };
}
