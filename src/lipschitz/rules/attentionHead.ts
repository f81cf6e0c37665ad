import { InputError } from "../../util/errors.ts";
import { rowStats } from "../../softmax/rowStats.ts";
import { solveSecular } from "../../softmax/sigma.ts";
import { sigmaQuadFromStats, sigmaTop2FromStats } from "../../softmax/closedForm.ts";
import {
  belowCertified,
  congruence,
  gramCols,
  spectralNorm,
  sqrtFactor,
  symMaxEigenvalue,
} from "../linalg.ts";
import {
  packedOuters,
  packedQuadraticForms,
  packedSize,
  packSymmetric,
  unpackSymmetric,
  weightedRowSums,
} from "./rowContractions.ts";

/**
 * Local Lipschitz bounds of ONE attention head at an input X (docs/math.md section 2), in float64.
 *
 * The head: Q = X W_Q + 1 b_Q^T, K = X W_K + 1 b_K^T, V = X W_V + 1 b_V^T (W [d, d_k]),
 * P = rowsoftmax(Q K^T / sqrt(d_k)) over allowed keys (masked entries exactly 0; a query row
 * with no allowed key has P_i = 0), f(X) = P V, and the bound is on ||Df(X)||_2 with X and
 * f(X) measured in the Frobenius norm.
 */

/**
 * The local head variants of dot-product attention, in the order of docs/math.md section 2: the
 * default list for a model without L2 attention.
 */
export const HEAD_VARIANTS = [
  "paper",
  "t3-one",
  "t3-half",
  "t3-top2",
  "t3-quad",
  "t3-exact",
  "dist",
  "cov",
  "fused",
  "castin",
] as const;

/**
 * The local variants of L2 self-attention (docs/math.md section 2, "Local bounds of L2
 * attention"; src/lipschitz/rules/l2Head.ts): `l2-dist` (each row's sigma and norms) and `l2-cov`
 * (row-exact query path). They bound ||Df(X)|| at the input X of an L2 layer; their score path is
 * derived for L2 scores, so dot-product layers refuse them.
 */
export const L2_LOCAL_VARIANTS = ["l2-dist", "l2-cov"] as const;

/**
 * The variants of L2 self-attention: {@link L2_LOCAL_VARIANTS} and `kim`, Kim et al.'s global
 * bound (ICML 2021, Theorem 3.2; docs/math.md section 2, "L2 self-attention").
 */
export const L2_VARIANTS = [...L2_LOCAL_VARIANTS, "kim"] as const;

/**
 * Every variant name: {@link HEAD_VARIANTS} and {@link L2_VARIANTS}. The L2 variants exist for
 * L2 attention only: dot-product attention is not globally Lipschitz (Kim et al. Theorem 3.1),
 * so its rule refuses `kim`, and the local L2 variants are derived for L2 scores, so it refuses
 * them too. An L2 layer gives the dot-product variants the vacuous bound Infinity.
 */
export const ALL_VARIANTS = [...HEAD_VARIANTS, ...L2_VARIANTS] as const;

/** One of {@link ALL_VARIANTS}. */
export type HeadVariant = (typeof ALL_VARIANTS)[number];

/**
 * The variants computed when none are asked for: {@link HEAD_VARIANTS}, and the L2 variants
 * (`l2-dist`, `l2-cov`, `kim`) too when the model has L2 attention.
 *
 * @example defaultVariants(true).at(-1) // "kim"
 */
export function defaultVariants(l2: boolean): readonly HeadVariant[] {
  return l2 ? ALL_VARIANTS : HEAD_VARIANTS;
}

/**
 * Checks a list of head variants: known names (ALL_VARIANTS), at least one, no repeats.
 *
 * @returns the list in ALL_VARIANTS order.
 * @throws RangeError `WHO: variants: ...` naming the unknown or repeated name and the known ones.
 * @example checkVariants(["t3-exact", "paper"], "me") // ["paper", "t3-exact"]
 */
export function checkVariants(variants: readonly string[], who: string): HeadVariant[] {
  if (!Array.isArray(variants) || variants.length === 0)
    throw new RangeError(`${who}: variants: expected at least one of ${ALL_VARIANTS.join(", ")}`);
  const seen = new Set<string>();
  for (const v of variants) {
    if (!(ALL_VARIANTS as readonly string[]).includes(v))
      throw new RangeError(
        `${who}: variants: unknown variant "${v}" (known: ${ALL_VARIANTS.join(", ")})`,
      );
    if (seen.has(v)) throw new RangeError(`${who}: variants: "${v}" is listed twice`);
    seen.add(v);
  }
  return ALL_VARIANTS.filter((v) => seen.has(v));
}

/**
 * Why dot-product attention has no `kim` value: the message of the RangeError its rules throw
 * when `kim` is asked for (prefixed by the layer's name).
 */
export const KIM_DOT_REFUSED =
  'variant "kim" (Kim et al. 2021, Theorem 3.2) bounds L2 attention only: dot-product attention is not globally Lipschitz (Kim et al. Theorem 3.1), so it has no global bound; ask for the local variants';

/**
 * Why dot-product attention has no `l2-dist` or `l2-cov` value: the message of the RangeError its
 * rules throw when one is asked for (prefixed by the layer's name).
 */
export const L2_LOCAL_DOT_REFUSED =
  'variants "l2-dist" and "l2-cov" bound L2 attention only: their score paths are derived for the scores -||q_i - q_j||^2 / sqrt(d_k) with tied queries and keys (docs/math.md section 2, "Local bounds of L2 attention"); for dot-product attention ask for its own variants (dist, cov, fused, ...)';

/**
 * Throws {@link KIM_DOT_REFUSED} or {@link L2_LOCAL_DOT_REFUSED} when `variants` holds an L2
 * variant (dot-product attention's rules call it). An InputError: the CLI reports it as bad input
 * (`--variants`), in one line with exit code 2.
 *
 * @throws InputError `WHO: ...`.
 */
export function refuseL2Variants(variants: readonly HeadVariant[], who: string): void {
  if (variants.includes("kim")) throw new InputError(`${who}: ${KIM_DOT_REFUSED}`);
  if (variants.some((v) => (L2_LOCAL_VARIANTS as readonly string[]).includes(v)))
    throw new InputError(`${who}: ${L2_LOCAL_DOT_REFUSED}`);
}

/** A value per head variant. */
export type VariantValues = Record<HeadVariant, number>;

/** One head's weights in float64: W_Q, W_K, W_V [d, d_k] row-major; biases [d_k] optional. */
export interface HeadWeights {
  d: number;
  dk: number;
  wq: Float64Array;
  wk: Float64Array;
  wv: Float64Array;
  bq?: Float64Array;
  bk?: Float64Array;
  bv?: Float64Array;
}

/**
 * Input-independent quantities of one head, computed once per model ({@link headWeightNorms}).
 * Factors F [d_k, d_k] satisfy F^T F = W^T W.
 */
export interface HeadNorms {
  d: number;
  dk: number;
  /** G_Q = W_Q^T W_Q and G_K = W_K^T W_K [d_k, d_k]. */
  gq: Float64Array;
  gk: Float64Array;
  /** Square-root factors of W_Q^T W_Q and W_K^T W_K. */
  fq: Float64Array;
  fk: Float64Array;
  /** ||W_V||_2 and ||W_K||_2. */
  wv: number;
  wk: number;
  /** ||A||_2, A = W_Q W_K^T / sqrt(d_k). */
  a: number;
  /**
   * Whether the head is treated by input augmentation in `paper` and `castin` (b_Q has a
   * nonzero entry); then `aAug` = ||A~||_2 with W~_Q = [W_Q; b_Q^T], W~_K = [W_K; 0].
   */
  augmented: boolean;
  aAug: number;
}

/**
 * Spectral norms and factors of one head's weights (docs/math.md section 2).
 *
 * @returns {@link HeadNorms}; ||A|| from ||W_Q W_K^T||^2 = lambda_max(F_Q G_K F_Q^T).
 * @throws RangeError when array lengths do not match d and d_k.
 */
export function headWeightNorms(w: HeadWeights): HeadNorms {
  const { d, dk } = w;
  for (const [name, m] of [
    ["wq", w.wq],
    ["wk", w.wk],
    ["wv", w.wv],
  ] as const)
    if (m.length !== d * dk)
      throw new RangeError(`head weights: ${name} must have ${d * dk} entries, got ${m.length}`);
  for (const [name, b] of [
    ["bq", w.bq],
    ["bk", w.bk],
    ["bv", w.bv],
  ] as const)
    if (b !== undefined && b.length !== dk)
      throw new RangeError(`head weights: ${name} must have ${dk} entries, got ${b.length}`);
  const gq = gramCols(w.wq, d, dk);
  const gk = gramCols(w.wk, d, dk);
  const fq = sqrtFactor(gq, dk);
  const fk = sqrtFactor(gk, dk);
  const a = Math.sqrt(Math.max(symMaxEigenvalue(congruence(fq, gk, dk, dk), dk), 0) / dk);
  const augmented = w.bq !== undefined && w.bq.some((x) => x !== 0);
  let aAug = a;
  if (augmented) {
    // G~_Q = G_Q + b_Q b_Q^T; W~_K = [W_K; 0] has the same Gram matrix as W_K.
    const gqa = Float64Array.from(gq);
    const bq = w.bq as Float64Array;
    for (let i = 0; i < dk; i++) for (let j = 0; j < dk; j++) gqa[i * dk + j] += bq[i] * bq[j];
    const fqa = sqrtFactor(gqa, dk);
    aAug = Math.sqrt(Math.max(symMaxEigenvalue(congruence(fqa, gk, dk, dk), dk), 0) / dk);
  }
  const wk = Math.sqrt(Math.max(symMaxEigenvalue(gk, dk), 0));
  return { d, dk, gq, gk, fq, fk, wv: spectralNorm(w.wv, d, dk), wk, a, augmented, aAug };
}

/** Norms of the head input X [n, d] that every head of a layer shares ({@link inputNorms}). */
export interface InputNorms {
  /** ||X||_2 and ||[X, 1]||_2 (NaN when not asked for: only `paper` reads them). */
  x: number;
  xAug: number;
  /** max_i ||x_i|| and max_i ||[x_i, 1]||. */
  r: number;
  rAug: number;
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

/** What one head needs from a forward pass, for one sequence. */
export interface HeadActivations {
  /** Tokens n. */
  n: number;
  /** X [n, d], the head's input (used by `paper` and `castin` through `xNorms` when absent). */
  x?: ArrayLike<number>;
  /** Precomputed {@link inputNorms} of X (shared by the heads of a layer). */
  xNorms?: InputNorms;
  /** Q, K, V [n, d_k] including biases (Q unscaled). */
  q: ArrayLike<number>;
  k: ArrayLike<number>;
  v: ArrayLike<number>;
  /** P [n, n] (row = query), exactly 0 at masked keys. */
  p: ArrayLike<number>;
  /** Allowed keys [n, n] (row = query), nonzero/true = may attend; absent = all allowed. */
  allowed?: ArrayLike<number | boolean>;
}

/**
 * A row-wise map before the head, X = G(U) with row Jacobians L_j (row-vector convention,
 * dx_j = du_j L_j; a pre-LN block's LayerNorm), for the `fused` variant, which then bounds the
 * head after the map, ||D(f o G)(U)||_2 (docs/math.md section 2, `fused`).
 */
export interface PreRowwise {
  /** (L_j W_Q)^T (L_j W_Q) and (L_j W_K)^T (L_j W_K) per row j, [n, d_k, d_k] row-major. */
  gramQ: Float64Array;
  gramK: Float64Array;
  /** ||L_j W_K||_2 and ||L_j W_V||_2 per row j [n]. */
  kappa: Float64Array;
  nu: Float64Array;
  /** A bound on max_j ||L_j||_2 (the map's own local value). */
  factor: number;
}

/** The three operators of the row-resolved bound and the shared factors (docs/math.md section 2). */
export interface HeadParts {
  /** ||P||_2 ||W_V||_2. */
  valuePath: number;
  /** max_i ||W_Q K_c^T J_i V_c||_2 / sqrt(d_k) (exact); NaN when `cov` was not asked for (not computed). */
  queryPathExact: number;
  /** max_i s_i ||W_Q K_c^T||_2 ||V_c||_2 / sqrt(d_k), exact s_i. */
  queryPathRelaxed: number;
  /** ||diag(s) Q W_K^T||_2 ||V_c||_2 / sqrt(d_k), exact s_i. */
  keyPath: number;
  /** `fused`'s value, query and key paths (NaN when `fused` was not asked for). */
  fusedValuePath: number;
  fusedQueryPath: number;
  fusedKeyPath: number;
  /** ||P||_2, ||W_Q K_c^T||_2, ||Q W_K^T||_2, ||V_c||_2. */
  p: number;
  wqKc: number;
  qWk: number;
  vc: number;
}

/** Per-row softmax-Jacobian values of one head (over live rows only: rows with an allowed key). */
export interface HeadRowStats {
  /** Live query rows (at least one allowed key). */
  live: Uint8Array;
  /** Exact sigma, sigma_quad, sigma_top2 per row (0 on rows that are not live). */
  exact: Float64Array;
  quad: Float64Array;
  top2: Float64Array;
  /** p_(1) and entropy (nats) per row. */
  top: Float64Array;
  entropy: Float64Array;
}

/** Result of {@link attentionHeadBounds}. */
export interface HeadBounds {
  /** Each variant's bound on ||Df(X)||_2 (Frobenius in, Frobenius out). */
  values: VariantValues;
  parts: HeadParts;
  rows: HeadRowStats;
  /** `fused`'s per-row pieces, with options.keepRows (see {@link FusedRows}). */
  fusedRows?: FusedRows;
}

/**
 * `fused`'s per-row pieces at one input (options.keepRows of {@link attentionHeadBounds}), from
 * which {@link fusedWithRowWeights} gives `fused` with any output-row weights without redoing
 * the O(n^2 d_k^2) work: each path bounds every output row on its own before the rows are
 * combined (docs/math.md section 2, `fused`, "Output-row weights").
 */
export interface FusedRows {
  n: number;
  dk: number;
  /** Value path matrix P diag(nu) [n, n] (rows scaled by the weights later). */
  pNu: Float64Array;
  /** Query path: lambda_max(C_i^T G_i C_i) per row (its square, before 1/sqrt(d_k)); 0 off the live rows. */
  query2: Float64Array;
  /** Key path (ii): tau_i^2 per row, with the queries q [n, d_k]. */
  tau2: Float64Array;
  q: Float64Array;
  /** Key path (i): ||V^T J_i diag(rho_i)||^2 per row. */
  pair2: Float64Array;
  /** `cov`'s key path times max_j ||L_j|| (scaled by the largest live weight). */
  keyRelaxed: number;
  live: Uint8Array;
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
 * Every variant of docs/math.md section 2 for one head at one input:
 *
 * - `paper` (Theorem-3 form as transcribed): ||W_V||_2 (||P||_2 + 2 ||X||_2^2 ||A||_2 max_i sigma_top2(P_i)).
 * - `t3-*`: L_T3(s) = ||P||_2 ||W_V||_2 + s_max (||W_Q K_c^T||_2 + ||Q W_K^T||_2) ||V_c||_2 / sqrt(d_k)
 *   with s = 1, 1/2, sigma_top2, sigma_quad, exact sigma.
 * - `dist`: value path + max_i s_i ||W_Q K_c^T|| ||V_c|| / sqrt(d_k) + key path (exact s_i).
 * - `cov`: value path + max_i ||W_Q K_c^T J_i V_c||_2 / sqrt(d_k) + key path.
 *   key path = ||diag(s) Q W_K^T||_2 ||V_c||_2 / sqrt(d_k).
 * - `fused`: `cov` resolved by token on every path, with an optional row-wise map before the
 *   head (options.pre; without it L_j = I): value path ||P diag(nu)||_2, nu_j = ||L_j W_V||;
 *   query path max_i ||L_i W_Q K_c^T J_i V_c||_2 / sqrt(d_k); key path the smaller of
 *   `cov`'s key path times max_j ||L_j|| and ||diag(tau) Q||_2 / sqrt(d_k) with
 *   tau_i = ||V_c^T J_i diag(kappa)||_2, kappa_j = ||L_j W_K||. With options.post (weights
 *   w_i >= 0 on the output rows) it bounds ||diag(w) Df||_2 instead: each path's output row i
 *   scaled by w_i (docs/math.md section 3, "A row-wise run fused into the layer before it").
 * - `castin`: sqrt(3) ||W_V||_2 (||A||_2^2 R^4 (4n + 1) + n)^(1/2), R = max_i ||x_i||.
 *
 * Heads with a query bias (`paper`, `castin`): the head is a bias-free head of the augmented
 * input X~ = [X, 1] with W~_Q = [W_Q; b_Q^T]. b_K and b_V do not change Df at all (q_i b_K
 * shifts a whole score row, which softmax ignores; P_i 1 b_V^T is constant), so W~_K = [W_K; 0],
 * W~_V = [W_V; 0]. Directions E~ = [E, 0] are a subset of the augmented head's directions, so
 * its bias-free bound, with ||X~||_2 and R = max ||x~_i||, bounds the original head.
 *
 * Masks: K_c and V_c keep the key rows allowed for some query, centered over those rows (J_i has
 * zero rows and columns at a row's masked keys and J_i 1 = 0, so this is exact); Q keeps the live
 * rows; s_max is over live rows. A fully masked row (no allowed key) has P_i = 0, s_i = 0 and
 * contributes nothing; everything stays finite. Padded query rows that still attend to real
 * keys (how this package masks padding) are ordinary live rows.
 *
 * @param act activations of one sequence (see {@link HeadActivations}); q/k/v/p may be float32.
 * @param norms the head's {@link HeadNorms}.
 * @param options.variants the variants to compute (default all); without `cov` its exact query
 *   path, O(n^2 d_k^2), is skipped, and without `fused` its paths.
 * @param options.pre the row-wise map before the head ({@link PreRowwise}), read by `fused` only.
 * @param options.post weights w_i >= 0 of the head's output rows [n], read by `fused` only: it
 *   then bounds ||diag(w) Df||_2 (the rows' norms in the map after the layer).
 * @returns values for those variants, the parts, and per-row sigma statistics.
 * @throws RangeError when neither act.x nor act.xNorms is given, or on size mismatches.
 */
export function attentionHeadBounds(
  act: HeadActivations,
  norms: HeadNorms,
  options: {
    variants?: readonly HeadVariant[];
    pre?: PreRowwise;
    post?: ArrayLike<number>;
    keepRows?: boolean;
  } = {},
): HeadBounds {
  const wanted = options.variants ?? HEAD_VARIANTS;
  refuseL2Variants(wanted, "attention head");
  const { n } = act;
  const { d, dk } = norms;
  const { q: q0, k: k0, v: v0, p: p0, allowed: allowed0 } = act;
  if (q0.length !== n * dk || k0.length !== n * dk || v0.length !== n * dk)
    throw new RangeError(`attention head: q, k, v must have n*d_k = ${n * dk} entries`);
  if (p0.length !== n * n)
    throw new RangeError(`attention head: p must have n*n = ${n * n} entries, got ${p0.length}`);
  if (allowed0 !== undefined && allowed0.length !== n * n)
    throw new RangeError(
      `attention head: allowed must have n*n = ${n * n} entries, got ${allowed0.length}`,
    );
  // Float64 copies: one element kind in the loops below (float32 trace arrays and float64
  // test arrays would otherwise make them polymorphic and several times slower).
  const q = Float64Array.from(q0);
  const k = Float64Array.from(k0);
  const v = Float64Array.from(v0);
  const p = Float64Array.from(p0);
  const allowed =
    allowed0 === undefined ? undefined : Uint8Array.from(allowed0, (a) => (a ? 1 : 0));
  let xn = act.xNorms;
  if (xn === undefined) {
    if (act.x === undefined) throw new RangeError("attention head: give x or xNorms");
    xn = inputNorms(act.x, n, d);
  }
  const rows = headRowStats(p, n, allowed);
  const sqrtDk = Math.sqrt(dk);

  // Keys allowed for at least one query.
  const activeKey = new Uint8Array(n);
  for (let i = 0; i < n; i++) {
    if (!rows.live[i]) continue;
    for (let j = 0; j < n; j++) if (allowed === undefined || allowed[i * n + j]) activeKey[j] = 1;
  }

  // Column-centered K_c, V_c over the active keys: their Gram matrices [d_k, d_k].
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
  const normVc = Math.sqrt(Math.max(symMaxEigenvalue(gramCols(vc, nActive, dk), dk), 0));
  const wqKc = Math.sqrt(Math.max(symMaxEigenvalue(congruence(norms.fq, ck, dk, dk), dk), 0));

  // Q over live rows, plain and weighted by s_i^2 (exact sigma).
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

  // ||P||_2 (masked entries read as 0).
  const pm = new Float64Array(n * n);
  for (let i = 0; i < n * n; i++) pm[i] = allowed !== undefined && !allowed[i] ? 0 : p[i];
  const normP = spectralNorm(pm, n, n);

  // Exact query path: per live row, C_i = K^T J_i V (J_i = diag(w) - w w^T, w = P_i), and
  // ||W_Q C_i||_2^2 = lambda_max(C_i^T G_Q C_i). With K, V centered by the active-key means
  // (mu_K, mu_V; kc_j = k_j - mu_K) and kb = sum_j w_j kc_j, vb = sum_j w_j vc_j, m = sum_j w_j:
  //   C_i = sum_j w_j kc_j vc_j^T - kb vb^T + (1 - m) (kb mu_V^T + mu_K vb^T + m mu_K mu_V^T),
  // exact for any m (float32 rows sum to 1 +- 1e-7), and free of the cancellation that
  // uncentered keys with a large common offset would cause. z_j = vec(kc_j vc_j^T) is shared by
  // all rows, so each row costs one pass of n * d_k^2 multiply-adds.
  let queryRelaxed = 0;
  for (let i = 0; i < n; i++)
    if (rows.live[i]) queryRelaxed = Math.max(queryRelaxed, rows.exact[i]);
  // The exact query path is cov's alone and its cost (n^2 d_k^2 per head): skipped without cov.
  const queryExact = wanted.includes("cov")
    ? queryPathExact(n, dk, k, v, kMean, vMean, activeKey, pm, rows, () => norms.gq) / sqrtDk
    : NaN;
  queryRelaxed = (queryRelaxed * wqKc * normVc) / sqrtDk;
  const keyPath = (sQWk * normVc) / sqrtDk;
  const valuePath = normP * norms.wv;

  // `fused`: every path resolved by token, after the row-wise map options.pre (L_j = I without one).
  let fusedValue = NaN;
  let fusedQuery = NaN;
  let fusedKey = NaN;
  let fusedRows: FusedRows | undefined;
  if (wanted.includes("fused")) {
    const pre = options.pre;
    if (
      pre !== undefined &&
      (pre.gramQ.length !== n * dk * dk ||
        pre.gramK.length !== n * dk * dk ||
        pre.kappa.length !== n ||
        pre.nu.length !== n)
    )
      throw new RangeError(`attention head: pre must hold ${n} rows of d_k = ${dk}`);
    const post = options.post;
    if (post !== undefined && (post.length !== n || !Array.from(post).every((w) => w >= 0)))
      throw new RangeError(`attention head: post must hold ${n} weights >= 0`);
    const kappa = pre?.kappa ?? new Float64Array(n).fill(norms.wk);
    // Value path: ||sum_j P_ij e_j L_j W_V|| <= sum_j P_ij nu_j ||e_j|| with P >= 0; without a
    // map every nu_j is ||W_V|| and this is the value path above.
    // Output rows weighted by options.post (a row-wise map after the layer): row i scaled by post_i.
    const keepRows = options.keepRows === true && post === undefined;
    if (pre === undefined && post === undefined && !keepRows) fusedValue = valuePath;
    else {
      const pNu = new Float64Array(n * n);
      for (let i = 0; i < n; i++)
        for (let j = 0; j < n; j++)
          pNu[i * n + j] = (post?.[i] ?? 1) * pm[i * n + j] * (pre?.nu[j] ?? norms.wv);
      fusedValue = spectralNorm(pNu, n, n);
      if (keepRows)
        fusedRows = {
          n,
          dk,
          pNu,
          query2: new Float64Array(n),
          tau2: new Float64Array(n),
          q: Float64Array.from(q),
          pair2: new Float64Array(n),
          keyRelaxed: keyPath * (pre?.factor ?? 1),
          live: rows.live,
        };
    }
    fusedQuery =
      pre === undefined && post === undefined && wanted.includes("cov") && !keepRows
        ? queryExact
        : queryPathExact(
            n,
            dk,
            k,
            v,
            kMean,
            vMean,
            activeKey,
            pm,
            rows,
            (i) =>
              pre === undefined ? norms.gq : pre.gramQ.subarray(i * dk * dk, (i + 1) * dk * dk),
            post,
            fusedRows?.query2,
          ) / sqrtDk;
    const [tokenKey, pairKey] = tokenKeyPaths(
      n,
      dk,
      q,
      v,
      vMean,
      activeKey,
      pm,
      rows,
      kappa,
      norms.gk,
      pre === undefined ? null : pre.gramK,
      post,
      fusedRows,
    );
    let postMax = 1;
    if (post !== undefined) {
      postMax = 0;
      for (let i = 0; i < n; i++) if (rows.live[i]) postMax = Math.max(postMax, post[i]);
    }
    fusedKey = Math.min(
      keyPath * (pre?.factor ?? 1) * postMax,
      tokenKey / sqrtDk,
      pairKey / sqrtDk,
    );
  }

  const t3 = (s: number) => valuePath + (s * (wqKc + qWk) * normVc) / sqrtDk;
  const aug = norms.augmented;
  const xNorm = aug ? xn.xAug : xn.x;
  const aNorm = aug ? norms.aAug : norms.a;
  const r = aug ? xn.rAug : xn.r;
  const all: Record<(typeof HEAD_VARIANTS)[number], number> = {
    paper: norms.wv * (normP + 2 * xNorm * xNorm * aNorm * sMax.top2),
    "t3-one": t3(anyLive ? 1 : 0),
    "t3-half": t3(anyLive ? 0.5 : 0),
    "t3-top2": t3(sMax.top2),
    "t3-quad": t3(sMax.quad),
    "t3-exact": t3(sMax.exact),
    dist: valuePath + queryRelaxed + keyPath,
    cov: valuePath + queryExact + keyPath,
    // Without a map `fused` <= `cov` (docs/math.md section 2); the min keeps it so in rounding too.
    fused:
      options.pre === undefined && options.post === undefined && wanted.includes("cov")
        ? Math.min(fusedValue + fusedQuery + fusedKey, valuePath + queryExact + keyPath)
        : fusedValue + fusedQuery + fusedKey,
    castin: Math.sqrt(3) * norms.wv * Math.sqrt(aNorm * aNorm * r ** 4 * (4 * n + 1) + n),
  };
  const values = {} as VariantValues;
  for (const name of wanted) values[name] = all[name as keyof typeof all];
  return {
    values,
    parts: {
      valuePath,
      queryPathExact: queryExact,
      queryPathRelaxed: queryRelaxed,
      keyPath,
      fusedValuePath: fusedValue,
      fusedQueryPath: fusedQuery,
      fusedKeyPath: fusedKey,
      p: normP,
      wqKc,
      qWk,
      vc: normVc,
    },
    rows,
    ...(fusedRows !== undefined ? { fusedRows } : {}),
  };
}

/**
 * max over live rows of ||W_Q K^T J_i V||_2 (not yet divided by sqrt(d_k)); see the comment in
 * {@link attentionHeadBounds}. A separate function so that V8 optimizes its loops on their own.
 * `gramOf(i)` is the Gram matrix of the query weights seen by row i: W_Q^T W_Q, or
 * (L_i W_Q)^T (L_i W_Q) after a row-wise map (`fused`).
 */
function queryPathExact(
  n: number,
  dk: number,
  k: Float64Array,
  v: Float64Array,
  kMean: Float64Array,
  vMean: Float64Array,
  activeKey: Uint8Array,
  pm: Float64Array,
  rows: HeadRowStats,
  gramOf: (row: number) => Float64Array,
  rowWeight?: ArrayLike<number>,
  perRow?: Float64Array,
): number {
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
  n: number,
  dk: number,
  q: Float64Array,
  v: Float64Array,
  vMean: Float64Array,
  activeKey: Uint8Array,
  pm: Float64Array,
  rows: HeadRowStats,
  kappa: Float64Array,
  gramK: Float64Array,
  gramKRows: Float64Array | null,
  rowWeight?: ArrayLike<number>,
  keep?: FusedRows,
): [number, number] {
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
