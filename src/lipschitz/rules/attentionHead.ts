import { congruence, gramCols, spectralNorm, sqrtFactor, symMaxEigenvalue } from "../linalg.ts";
import { boundVariant, dotNeeds, refuseL2Variants, variantNames } from "../variants/index.ts";
import { dotHeadQuantities } from "./headQuantities.ts";
import type {
  HeadActivations,
  HeadBounds,
  HeadNorms,
  HeadVariant,
  HeadWeights,
  PreRowwise,
  VariantValues,
} from "./headTypes.ts";

/**
 * Local Lipschitz bounds of ONE attention head at an input X (docs/math.md section 2), in float64.
 *
 * The head: Q = X W_Q + 1 b_Q^T, K = X W_K + 1 b_K^T, V = X W_V + 1 b_V^T (W [d, d_k]),
 * P = rowsoftmax(Q K^T / sqrt(d_k)) over allowed keys (masked entries exactly 0; a query row
 * with no allowed key has P_i = 0), f(X) = P V, and the bound is on ||Df(X)||_2 with X and
 * f(X) measured in the Frobenius norm. The variants are records in src/lipschitz/variants/
 * (registry.ts); their lists, checks and refusals are re-exported here.
 */

export {
  ALL_VARIANTS,
  HEAD_VARIANTS,
  L2_LOCAL_VARIANTS,
  L2_VARIANTS,
  KIM_DOT_REFUSED,
  L2_LOCAL_DOT_REFUSED,
  checkVariants,
  defaultVariants,
  refuseL2Variants,
} from "../variants/index.ts";
export type * from "./headTypes.ts";
export { headRowStats, inputNorms } from "./headQuantities.ts";
export { fusedWithRowWeights } from "./fusedPaths.ts";

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

/**
 * Every asked-for variant of docs/math.md section 2 for one head at one input, each from the
 * head's shared quantities (headQuantities.ts, computed once) by its record
 * (src/lipschitz/variants/). The built-ins:
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
 * @param options.variants the variants to compute (default: every registered variant of
 *   dot-product attention, variantNames("dot")); the costly quantities no asked-for variant
 *   needs are skipped (without `cov`, its exact query path, O(n^2 d_k^2); without `fused`, its
 *   paths).
 * @param options.pre the row-wise map before the head ({@link PreRowwise}), read by `fused` only.
 * @param options.post weights w_i >= 0 of the head's output rows [n], read by `fused` only: it
 *   then bounds ||diag(w) Df||_2 (the rows' norms in the map after the layer).
 * @returns values for those variants, the parts, and per-row sigma statistics.
 * @throws RangeError when neither act.x nor act.xNorms is given, on size mismatches, or on a
 *   variant not registered; InputError when a variant of L2 attention is asked for.
 * @example attentionHeadBounds({ n, x, q, k, v, p }, headWeightNorms(w)).values["t3-exact"]
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
  const wanted = options.variants ?? variantNames("dot");
  refuseL2Variants(wanted, "attention head");
  const specs = wanted.map((name) => boundVariant(name, "attention head"));
  const { quantities, parts, rows, fusedRows } = dotHeadQuantities(
    act,
    norms,
    dotNeeds(wanted),
    options,
  );
  const values = {} as VariantValues;
  for (const spec of specs) if (spec.kind === "dot") values[spec.name] = spec.compute(quantities);
  return { values, parts, rows, ...(fusedRows !== undefined ? { fusedRows } : {}) };
}
