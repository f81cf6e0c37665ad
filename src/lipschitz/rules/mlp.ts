import { activationDerivative } from "../../nn/gelu.ts";
import { belowCertified, gramRowsInto, matMulInto, symMaxEigenvalue } from "../linalg.ts";

/**
 * Local Lipschitz rule of the row-wise MLP y = act(x W_1 + b_1) W_2 + b_2 (docs/math.md section 3;
 * W_1 [d, hidden], W_2 [hidden, d], act = GELU in its tanh or exact erf form). Per row the Jacobian (row-vector
 * convention) is W_1 diag(act'(h_row)) W_2; rows do not mix, so the layer's local constant is
 * exactly max_row ||W_1 diag(act'(h_row)) W_2||_2 (docs/math.md writes it W_2 diag W_1 in column
 * convention; same norm).
 */

/** Result of {@link mlpBound}. */
export interface MlpBound {
  /** Exact local value max_row ||W_1 diag(act'(h_row)) W_2||_2. */
  local: number;
  /** Relaxed: ||W_1||_2 max_{row, unit} |act'(h)| ||W_2||_2, with the max over this input. */
  relaxed: number;
  /** Input-free: ||W_1||_2 max|act'| ||W_2||_2 (about 1.129 ||W_1|| ||W_2|| for both GELU forms). */
  global: number;
}

/**
 * @param h the pre-activation [n, hidden] (trace `mlpPre`).
 * @param w1 W_1 [d, hidden] row-major; @param w2 W_2 [hidden, d] row-major.
 * @param norms ||W_1||_2 and ||W_2||_2 (computed once per model).
 * @param options.local false skips the O(n d^2 hidden) exact value (then `local` is NaN;
 *   callers must then compose with `relaxed`).
 * @param options.activation "gelu-tanh" (default) or "gelu-erf" (src/nn/gelu.ts).
 * @returns {@link MlpBound}.
 * @throws RangeError on size mismatches or an unknown activation.
 * @example mlpBound(h, n, d, hidden, w1, w2, { w1: 1.2, w2: 0.9 }, { activation: "gelu-erf" }).local
 */
export function mlpBound(
  h: ArrayLike<number>,
  n: number,
  d: number,
  hidden: number,
  w1: ArrayLike<number>,
  w2: ArrayLike<number>,
  norms: { w1: number; w2: number },
  options: { local?: boolean; activation?: string } = {},
): MlpBound {
  const act = activationDerivative(options.activation ?? "gelu-tanh");
  if (h.length < n * hidden)
    throw new RangeError(`mlp: h must have n*hidden = ${n * hidden} entries, got ${h.length}`);
  if (w1.length !== d * hidden || w2.length !== hidden * d)
    throw new RangeError(`mlp: W_1 must be [${d}, ${hidden}] and W_2 [${hidden}, ${d}]`);
  const gAll = new Float64Array(n * hidden);
  let maxDeriv = 0;
  for (let i = 0; i < n * hidden; i++) {
    const g = act.derivative(h[i]);
    gAll[i] = g;
    maxDeriv = Math.max(maxDeriv, Math.abs(g));
  }
  const relaxed = norms.w1 * maxDeriv * norms.w2;
  const global = norms.w1 * act.max * norms.w2;
  if (options.local === false) return { local: NaN, relaxed, global };
  const w1f = w1 instanceof Float64Array ? w1 : Float64Array.from(w1);
  const w2f = w2 instanceof Float64Array ? w2 : Float64Array.from(w2);
  return { local: mlpLocal(gAll, n, d, hidden, w1f, w2f), relaxed, global };
}

/**
 * max_row ||W_1 diag(g_row) W_2||_2 for g [n, hidden]. Rows are visited in decreasing order of
 * a cheap proxy; a row whose M M^T satisfies lambda_max < the running max (certified by a
 * positive-definite LDL^T of c I - M M^T, c the running max) cannot raise the max and skips
 * the eigenvalue computation, so the result is the same max as without skipping (up to the
 * rounding of the certificate, far below the eigenvalue routine's upward margin).
 */
function mlpLocal(
  gAll: Float64Array,
  n: number,
  d: number,
  hidden: number,
  w1: Float64Array,
  w2: Float64Array,
): number {
  // Proxy per row: sum_u g_u^2 ||W_1[:, u]||^2 ||W_2[u, :]||^2 (= ||M||_F^2 when the rank-one
  // terms are orthogonal); only the visiting order depends on it.
  const colRow = new Float64Array(hidden);
  for (let u = 0; u < hidden; u++) {
    let s1 = 0;
    for (let a = 0; a < d; a++) s1 += w1[a * hidden + u] * w1[a * hidden + u];
    let s2 = 0;
    for (let b = 0; b < d; b++) s2 += w2[u * d + b] * w2[u * d + b];
    colRow[u] = s1 * s2;
  }
  const proxy = new Float64Array(n);
  for (let r = 0; r < n; r++) {
    let s = 0;
    for (let u = 0; u < hidden; u++) {
      const g = gAll[r * hidden + u];
      s += g * g * colRow[u];
    }
    proxy[r] = s;
  }
  const order = Array.from({ length: n }, (_, i) => i).sort((x, y) => proxy[y] - proxy[x]);
  const w1g = new Float64Array(d * hidden);
  const m = new Float64Array(d * d);
  const mmT = new Float64Array(d * d);
  const ldl = new Float64Array(d * d);
  let best = 0; // running max of lambda_max(M M^T)
  let any = false;
  for (const r of order) {
    const go = r * hidden;
    for (let a = 0; a < d; a++)
      for (let u = 0; u < hidden; u++) w1g[a * hidden + u] = w1[a * hidden + u] * gAll[go + u];
    matMulInto(w1g, w2, m, d, hidden, d);
    gramRowsInto(m, d, mmT);
    // The certificate's own rounding (backward error <= d (d + 1) eps ||c I - S||) is covered
    // by testing against a slightly smaller c.
    if (any && belowCertified(mmT, d, best * (1 - 4 * d * (d + 1) * Number.EPSILON), ldl)) continue;
    best = Math.max(best, symMaxEigenvalue(mmT, d));
    any = true;
  }
  return Math.sqrt(Math.max(best, 0));
}
