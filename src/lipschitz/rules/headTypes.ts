/**
 * The plain data of one attention head's bounds: its weights and their norms, its activations,
 * the per-row softmax statistics, the paths of the row-resolved bounds and their values per
 * variant. Types only, imported by the maths (rules/) and the variant records (variants/)
 * alike, so that neither imports the other's types.
 */

/**
 * A bound variant's name (docs/math.md section 2): a name registered with
 * registerBoundVariant (src/lipschitz/variants/registry.ts), e.g. "t3-exact".
 */
export type HeadVariant = string;

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
 * Input-independent quantities of one head, computed once per model (attentionHead.ts headWeightNorms).
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

/** Norms of the head input X [n, d] that every head of a layer shares (attentionHead.ts inputNorms). */
export interface InputNorms {
  /** ||X||_2 and ||[X, 1]||_2 (NaN when not asked for: only `paper` reads them). */
  x: number;
  xAug: number;
  /** max_i ||x_i|| and max_i ||[x_i, 1]||. */
  r: number;
  rAug: number;
}

/** What one head needs from a forward pass, for one sequence. */
export interface HeadActivations {
  /** Tokens n. */
  n: number;
  /** X [n, d], the head's input (used by `paper` and `castin` through `xNorms` when absent). */
  x?: ArrayLike<number>;
  /** Precomputed inputNorms (attentionHead.ts) of X (shared by the heads of a layer). */
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

/** Result of attentionHeadBounds (attentionHead.ts). */
export interface HeadBounds {
  /** Each variant's bound on ||Df(X)||_2 (Frobenius in, Frobenius out). */
  values: VariantValues;
  parts: HeadParts;
  rows: HeadRowStats;
  /** `fused`'s per-row pieces, with options.keepRows (see {@link FusedRows}). */
  fusedRows?: FusedRows;
}

/**
 * `fused`'s per-row pieces at one input (options.keepRows of attentionHeadBounds), from
 * which fusedWithRowWeights (fusedPaths.ts) gives `fused` with any output-row weights without redoing
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
 * One dot-product head at one input in float64, as its paths share it (rules/headQuantities.ts
 * builds it): Q, K, V [n, d_k], P with masked entries 0 [n, n], the per-row statistics, the keys
 * allowed for some live row and the means of K and V over them.
 */
export interface HeadInput {
  n: number;
  dk: number;
  q: Float64Array;
  k: Float64Array;
  v: Float64Array;
  pm: Float64Array;
  rows: HeadRowStats;
  activeKey: Uint8Array;
  kMean: Float64Array;
  vMean: Float64Array;
}
